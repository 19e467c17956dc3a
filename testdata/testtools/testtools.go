// Package testtools builds and starts the programs the tests run that are
// not sealbox dependencies (versitygw for blobs/s3test, litewitness for
// server/witness/witnesstest), from the module that pins them, testdata/tools.
// It lives under testdata/ beside them because the top level is fixed; go
// test ./... skips testdata, so .ci/run tests it by its path.
// Only test code imports it, so it never reaches the binary.
package testtools

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"golang.org/x/mod/modfile"
)

// Dir is the testdata/tools module's directory.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "tools")
}

// Pinned returns the version of module that testdata/tools/go.mod requires.
func Pinned(module string) (string, error) {
	path := filepath.Join(Dir(), "go.mod")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	f, err := modfile.Parse(path, data, nil)
	if err != nil {
		return "", err
	}
	for _, r := range f.Require {
		if r.Mod.Path == module {
			return r.Mod.Version, nil
		}
	}
	return "", fmt.Errorf("testdata/tools/go.mod does not require %s", module)
}

// Build returns the binary of the command pkg of module, as testdata/tools
// pins it. It is built once per pinned version into the user's cache
// directory, named name-<version>, so repeated runs do not rebuild it and a
// new pin is never served an old build.
func Build(name, module, pkg string) (string, error) {
	version, err := Pinned(module)
	if err != nil {
		return "", err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		// No HOME or XDG_CACHE_HOME (some CI runners): the temp dir.
		cache = os.TempDir()
	}
	if err := os.MkdirAll(filepath.Join(cache, "sealbox"), 0o700); err != nil {
		return "", err
	}
	bin := filepath.Join(cache, "sealbox", name+"-"+version)
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.tmp%d", bin, os.Getpid())
	cmd := exec.Command("go", "build", "-o", tmp, pkg)
	cmd.Dir = Dir()
	// go.sum pins the tool's modules; -mod=mod lets the build use them
	// whatever GOFLAGS the caller runs with.
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build %s %s in %s: %v\n%s", name, version, cmd.Dir, err, out)
	}
	// Renamed into place, so concurrent test processes never run a half
	// written binary.
	return bin, os.Rename(tmp, bin)
}

// FreeAddr returns a 127.0.0.1 address with a port no one listens on now.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
