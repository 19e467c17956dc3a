package server_test

import (
	"errors"
	"slices"
	"testing"

	"sealbox/server"
)

// TestConfigValidate: the defaults are valid, and a refused value names its
// field, with the value it was given.
func TestConfigValidate(t *testing.T) {
	cfg := server.DefaultConfig()
	if err := cfg.Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	cfg.Registration = "maybe"
	var bad *server.ConfigError
	if err := cfg.Validate(); !errors.As(err, &bad) || !slices.Equal(bad.Fields, []string{"Registration"}) ||
		err.Error() != `Registration must be open, closed or invite, not "maybe"` {
		t.Fatalf("got %v, want a ConfigError naming Registration", err)
	}
	cfg = server.DefaultConfig()
	cfg.AlbumProtocol = "{ProtocolMin}%d"
	if err := cfg.Validate(); !errors.As(err, &bad) || !slices.Equal(bad.Fields, []string{"AlbumProtocol"}) ||
		bad.Explain(func(f string) string { return "--x%" + f }) != `--x%AlbumProtocol must be a date YYYY-MM-DD, not "{ProtocolMin}%d"` {
		t.Fatalf("got %v, want the value kept as given and only the field named", err)
	}
}
