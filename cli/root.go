// Package cli wires sealbox together: it alone reads flags and the
// environment, opens the store and the blob store, and runs the server and
// the admin subcommands.
package cli

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Execute runs the sealbox command line and returns the process exit code.
func Execute(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cmd := NewRootCmd()
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "sealbox:", err)
		return 1
	}
	return 0
}

// NewRootCmd builds the `sealbox` command and its subcommands.
func NewRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sealbox",
		Short:         "A self-hosted server for an end-to-end encrypted photo and media service",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCmd(), newUsersCmd(), newBackupCmd(), newCheckCmd(), newGCCmd(), newVersionCmd())
	return root
}

// bindEnv gives every flag of cmd the value of its environment variable, as
// bindFlagEnv does.
func bindEnv(cmd *cobra.Command) error {
	var err error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err == nil {
			err = bindFlagEnv(f)
		}
	})
	return err
}

// bindFlagEnv gives flag f, if it was not set on the command line, the
// value of its SEALBOX_* environment variable (--max-body reads
// SEALBOX_MAX_BODY), if that is set.
func bindFlagEnv(f *pflag.Flag) error {
	if f.Changed {
		return nil
	}
	name := "SEALBOX_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
	if v, ok := os.LookupEnv(name); ok {
		if err := f.Value.Set(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}
