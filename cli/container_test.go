package cli

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// The container files cannot be built here (no registry to pull a base
// image from), so this test checks what can go wrong without a build: the
// paths, the user, the health check and every setting they pass agree with
// the binary.

// composeFile is the part of a compose file the test reads.
type composeFile struct {
	Services map[string]struct {
		Build       string            `yaml:"build"`
		Image       string            `yaml:"image"`
		Volumes     []string          `yaml:"volumes"`
		Environment map[string]string `yaml:"environment"`
	} `yaml:"services"`
}

// TestDockerfile: the image is non-root, keeps its data in the /data
// volume that SEALBOX_DATA names, builds the binary statically where
// ENTRYPOINT and HEALTHCHECK run it, its health check is a sealbox
// subcommand, and every SEALBOX_* variable it sets is read by a flag.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	df := strings.ReplaceAll(string(raw), "\\\n", " ")
	user := regexp.MustCompile(`(?m)^USER (\S+)`).FindAllStringSubmatch(df, -1)
	if len(user) == 0 || slices.Contains([]string{"root", "0", "0:0", "root:root"}, user[len(user)-1][1]) {
		t.Errorf("the image's last USER is %v: it must not be root", user)
	}
	if !regexp.MustCompile(`(?m)^VOLUME /data$`).MatchString(df) || !strings.Contains(df, "SEALBOX_DATA=/data") {
		t.Error("the image must keep its data in VOLUME /data, named by SEALBOX_DATA=/data")
	}
	for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-buildid="} {
		if !strings.Contains(df, want) {
			t.Errorf("the image's build lacks %s (the flags of .ci/release)", want)
		}
	}
	const bin = "/usr/local/bin/sealbox"
	for _, want := range []string{
		"COPY --from=build /out/sealbox " + bin,
		`ENTRYPOINT ["` + bin + `"]`,
		`CMD ["` + bin + `", "healthcheck"]`,
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile does not say %s", want)
		}
	}
	if cmd, _, err := NewRootCmd().Find([]string{"healthcheck"}); err != nil || cmd.Name() != "healthcheck" {
		t.Errorf("HEALTHCHECK runs `sealbox healthcheck`, which is not a subcommand: %v", err)
	}
	var env []string
	for _, m := range regexp.MustCompile(`(SEALBOX_[A-Z_]+)=`).FindAllStringSubmatch(df, -1) {
		env = append(env, m[1]+"=")
	}
	if unknown := unknownEnv(env, NewRootCmd()); len(unknown) > 0 {
		t.Errorf("the Dockerfile sets variables no flag reads: %v", unknown)
	}
}

// TestComposeFiles: each compose file's sealbox service builds this
// checkout, mounts a volume at /data, and sets only variables a flag
// reads, with --store and --blobs URLs serve accepts and no password in
// the store URL.
func TestComposeFiles(t *testing.T) {
	for _, name := range []string{"compose.yaml", "compose.postgres.yaml"} {
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile("../" + name)
			if err != nil {
				t.Fatal(err)
			}
			var c composeFile
			if err := yaml.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			s, ok := c.Services["sealbox"]
			if !ok {
				t.Fatal("no sealbox service")
			}
			if s.Build != "." {
				t.Errorf("the sealbox service builds %q, not this checkout (.)", s.Build)
			}
			if !slices.ContainsFunc(s.Volumes, func(v string) bool { return strings.HasSuffix(v, ":/data") }) {
				t.Errorf("no volume at /data: %v", s.Volumes)
			}
			var env []string
			for k := range s.Environment {
				env = append(env, k+"=")
			}
			if unknown := unknownEnv(env, NewRootCmd()); len(unknown) > 0 {
				t.Errorf("variables no flag reads: %v", unknown)
			}
			loc := Location{Store: s.Environment["SEALBOX_STORE"], Blobs: s.Environment["SEALBOX_BLOBS"]}
			if err := loc.validate(func(f string) string { return envName(f) }); err != nil {
				t.Error(err)
			}
			if loc.Store != "" && redactURL(loc.Store) != loc.Store {
				t.Errorf("SEALBOX_STORE holds a password (it shows in ps): give it as PGPASSWORD")
			}
		})
	}
}
