package cli

import (
	"os"
	"reflect"
	"regexp"
	"testing"

	"sealbox/server"
)

// wiredFields are the server.Config fields serve sets itself, from the data
// directory, its other flags or the process, and no flag sets directly.
var wiredFields = map[string]string{
	"EngineMetrics":   "the engines' own registry",
	"Argon2":          "password.Default: no knob an operator can get wrong",
	"SealKey":         "server.key in the data directory",
	"NodeID":          "kept in the data directory",
	"LogKey":          "kept in the data directory",
	"TransparencyLog": "the one log serve builds from LogKey and hands the witness too",
	"Witnesses":       "parsed from --witness, VKEY=URL",
	"Now":             "the process's clock",
	"Rand":            "crypto/rand",
	"Log":             "--log-level's logger",
}

// TestConfigFieldsHaveFlagsAndRows: every server.Config field an operator
// tunes has a serve flag, and that flag a row in one of the README's flag
// tables, so a new knob cannot ship without either.
func TestConfigFieldsHaveFlagsAndRows(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	flags := configFlags()
	fields := map[uintptr]string{}
	configFields(reflect.ValueOf(&server.Config{}).Elem(), fields)
	if len(fields) < 40 {
		t.Fatalf("found %d fields of server.Config", len(fields))
	}
	for _, field := range fields {
		flag, ok := flags[field]
		if _, wired := wiredFields[field]; wired {
			if ok {
				t.Errorf("%s is set by --%s: take it off wiredFields", field, flag)
			}
			continue
		}
		if !ok {
			t.Errorf("server.Config.%s has no serve flag", field)
			continue
		}
		row := regexp.MustCompile("(?m)^\\| [^\\n]*`--" + regexp.QuoteMeta(flag) + "`[^\\n]*`" + envName(flag) + "`")
		if !row.Match(readme) {
			t.Errorf("--%s (server.Config.%s) has no row in the README's flag tables", flag, field)
		}
	}
}

// TestValidateConfigNamesFlags: a refused value is named by its flag, or by
// its variable when the environment set it, never by the Go field.
func TestValidateConfigNamesFlags(t *testing.T) {
	cfg := server.DefaultConfig()
	cfg.MaxShareServes = 1
	err := validateConfig(&cfg, cliFlag)
	if want := "--max-share-links must be at least 1 and --max-share-serves at least 10000, one link's most"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
	cfg = server.DefaultConfig()
	cfg.BodyTimeout = 0
	err = validateConfig(&cfg, func(flag string) string { return envName(flag) })
	if want := "SEALBOX_READ_HEADER_TIMEOUT, SEALBOX_BODY_TIMEOUT and SEALBOX_PASSWORD_ATTEMPT_TTL must be positive"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %q", err, want)
	}
}
