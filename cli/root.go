// Package cli wires sealbox together: it alone reads flags and the
// environment, opens the store and the blob store, and runs the server and
// the admin subcommands.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"sealbox/kv/fault"
)

// Execute runs the sealbox command line and returns the process exit code.
func Execute(args []string) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return execute(ctx, NewRootCmd(), args)
}

// execute runs cmd with args and returns the process exit code.
func execute(ctx context.Context, cmd *cobra.Command, args []string) int {
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "sealbox:", inWords(err))
		// A command with exit codes of its own (audit) says which.
		var coded interface{ ExitCode() int }
		if errors.As(err, &coded) {
			return coded.ExitCode()
		}
		return 1
	}
	return 0
}

// inWords is err's message for a person. A catalog error's stable code is
// for programs (the API's problem bodies carry it): the message alone says
// it, or, when there is none, the code spelled out in words.
func inWords(err error) string {
	var fe *fault.Error
	if !errors.As(err, &fe) {
		return err.Error()
	}
	words := fe.Message
	if words == "" {
		words = strings.NewReplacer(".", " ", "_", " ").Replace(strings.TrimPrefix(fe.Code, "error."))
	}
	return strings.Replace(err.Error(), fe.Error(), words, 1)
}

// count says n of a noun in words: "1 problem", "2 problems".
func count[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// NewRootCmd builds the `sealbox` command and its subcommands.
func NewRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "sealbox",
		Short:         "A self-hosted server for an end-to-end encrypted photo and media service",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionText(),
	}
	root.SetVersionTemplate("{{.Version}}")
	// Operators' commands and users' commands stay apart in --help.
	root.AddGroup(&cobra.Group{ID: groupUsing, Title: "Using sealbox (putting photos in, getting them back):"},
		&cobra.Group{ID: groupRunning, Title: "Running a sealbox server:"})
	for _, c := range []*cobra.Command{newServeCmd(), newUsersCmd(), newBackupCmd(), newRestoreCmd(), newCheckCmd(), newGCCmd(),
		newCompactCmd(), newHealthcheckCmd(), newDevCmd(), newAuditCmd()} {
		c.GroupID = groupRunning
		root.AddCommand(c)
	}
	root.AddCommand(newClientCmd(), newVersionCmd())
	return root
}

// The groups of sealbox's commands in --help.
const (
	groupUsing   = "using"
	groupRunning = "running"
)

// envName is the environment variable of a flag: --max-body is
// SEALBOX_MAX_BODY.
func envName(flag string) string {
	return "SEALBOX_" + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// documentEnv appends each flag's environment variable to its help line, so
// `--help` names every variable the command reads.
func documentEnv(flags *pflag.FlagSet) {
	flags.VisitAll(func(f *pflag.Flag) {
		f.Usage += " [$" + envName(f.Name) + "]"
	})
}

// bindEnv gives every flag of cmd the value of its environment variable, as
// bindFlagEnv does, the location flags as bindLocationEnv does; it returns
// the location variables that were set but not read.
func bindEnv(cmd *cobra.Command) (ignored []string, err error) {
	if ignored, err = bindLocationEnv(cmd.Flags()); err != nil {
		return nil, err
	}
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if err == nil && !slices.Contains(locationFlags, f.Name) {
			err = bindFlagEnv(f)
		}
	})
	return ignored, err
}

// locationFlags name one instance together: its data directory, and where
// its records and blobs are when not in it.
var locationFlags = []string{"data", "store", "blobs"}

// bindLocationEnv gives --data, --store and --blobs their SEALBOX_* values
// as one: when the command line gives any of them, the environment gives
// none, since a flag always wins over the environment and together they
// name one instance (an exported SEALBOX_STORE must not send `users add
// --data DIR` to another instance's database). It returns the variables
// that were set but not read for that reason, for the command to say so.
func bindLocationEnv(flags *pflag.FlagSet) (ignored []string, err error) {
	fromCommandLine := slices.ContainsFunc(locationFlags, func(name string) bool { return flags.Changed(name) })
	var unused Location
	for _, name := range locationFlags {
		f := flags.Lookup(name)
		if f == nil || f.Changed {
			continue
		}
		if v, set := os.LookupEnv(envName(name)); set && fromCommandLine {
			ignored = append(ignored, envName(name))
			switch name {
			case "store":
				unused.Store = v
			case "blobs":
				unused.Blobs = v
			}
			continue
		}
		if err := bindFlagEnv(f); err != nil {
			return nil, err
		}
	}
	// A variable left unused is still refused when it names no engine
	// sealbox has: it is wrong wherever it is read.
	if err := unused.validate(envName); err != nil {
		return nil, err
	}
	return ignored, nil
}

// ignoredLocationEnv is the sentence saying which location variables the
// command line overrode.
func ignoredLocationEnv(ignored []string) string {
	return fmt.Sprintf("%s set but not used: the command line names the instance (--data, --store, --blobs); give the flag too to use it", strings.Join(ignored, " and "))
}

// bindFlagEnv gives flag f, if it was not set on the command line, the
// value of its SEALBOX_* environment variable (--max-body reads
// SEALBOX_MAX_BODY), if that is set. A value that does not parse is refused
// naming the variable, not the flag the user never typed.
func bindFlagEnv(f *pflag.Flag) error {
	if f.Changed {
		return nil
	}
	name := envName(f.Name)
	if v, ok := os.LookupEnv(name); ok {
		if err := f.Value.Set(v); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	return nil
}

// flagNamer names a flag as the user gave its value, for messages about
// that value: "--registration" from the command line (or the default),
// "SEALBOX_REGISTRATION" when the value came from the environment.
func flagNamer(flags *pflag.FlagSet) func(flag string) string {
	fromCommandLine := slices.ContainsFunc(locationFlags, func(name string) bool { return flags.Changed(name) })
	return func(flag string) string {
		if fromCommandLine && slices.Contains(locationFlags, flag) {
			return "--" + flag
		}
		if f := flags.Lookup(flag); f != nil && !f.Changed {
			if _, ok := os.LookupEnv(envName(flag)); ok {
				return envName(flag)
			}
		}
		return "--" + flag
	}
}

// unknownEnv lists the SEALBOX_* variables in env that no flag of any
// sealbox command reads, sorted: most likely a misspelt setting that would
// otherwise be ignored without a word.
func unknownEnv(env []string, root *cobra.Command) []string {
	known := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) { known[envName(f.Name)] = true })
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	var out []string
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, "SEALBOX_") && !known[name] && !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}
