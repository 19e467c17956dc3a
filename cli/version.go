package cli

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"

	"sealbox/kv"
	"sealbox/server"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the sealbox version, the commit it was built from, and the store format it writes",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprint(cmd.OutOrStdout(), versionText())
			return nil
		},
	}
}

// versionText is what `sealbox version` and `sealbox --version` print: the
// release, the commit and commit time the binary was built from, and the
// store format it writes, so two builds of one release that write different
// formats tell themselves apart.
func versionText() string {
	info, _ := debug.ReadBuildInfo()
	return describeBuild(info)
}

// describeBuild is versionText for the build info info (nil when the
// binary carries none).
func describeBuild(info *debug.BuildInfo) string {
	cfg := server.DefaultConfig()
	var b strings.Builder
	fmt.Fprintf(&b, "sealbox %s (protocol %s to %s)\n", server.Version, cfg.ProtocolMin, cfg.ProtocolMax)
	settings := map[string]string{}
	goVersion := "unknown"
	if info != nil {
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			settings[s.Key] = s.Value
		}
	}
	if rev := settings["vcs.revision"]; rev != "" {
		if settings["vcs.modified"] == "true" {
			rev += " with uncommitted changes"
		}
		fmt.Fprintf(&b, "commit:       %s\n", rev)
		fmt.Fprintf(&b, "commit time:  %s\n", settings["vcs.time"])
	} else {
		fmt.Fprintf(&b, "commit:       unknown (built without version control information)\n")
	}
	fmt.Fprintf(&b, "store format: %d (see CHANGELOG.md)\n", kv.FormatVersion)
	fmt.Fprintf(&b, "built with:   %s %s/%s\n", goVersion, settings["GOOS"], settings["GOARCH"])
	return b.String()
}
