package cli

import (
	"cmp"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"sealbox/cli/library"
)

func newClientDevicesCmd(f *clientFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "devices",
		Short: "List the account's sessions (every device signed in), marking this one",
		Long: `Lists every live session of the account, oldest first: its id, the device it claims to
be, its device cohort, its user agent, when it signed in and when it was last seen. End one
with sealbox client devices remove ID, or all with sealbox client sign-out-everywhere. With
--json: {"sessions":[...],"cohorts":[...]} as the server lists them.`,
		Args: clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			sessions, cohorts, err := library.Sessions(cmd.Context(), a.client)
			if err != nil {
				return serverError(err)
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]any{"sessions": sessions, "cohorts": cohorts})
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "SESSION\tDEVICE\tCOHORT\tUSER AGENT\tFIRST SEEN\tLAST SEEN\t")
			for _, s := range sessions {
				cohort := s.CohortHash
				if len(cohort) > 12 {
					cohort = cohort[:12]
				}
				mark := ""
				if s.Current {
					mark = "this device"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", s.SessionID, cmp.Or(s.DeviceID, "-"), cmp.Or(cohort, "-"),
					cmp.Or(s.UserAgent, "-"), s.CreatedAt, s.LastActiveAt, mark)
			}
			return w.Flush()
		},
	}
	cmd.AddCommand(newClientDevicesRemoveCmd(f))
	return cmd
}

func newClientDevicesRemoveCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "remove SESSION-ID",
		Short: "End one session of the account (its device must sign in again)",
		Args:  clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			// Whether it is this device's own session, asked before it ends.
			sessions, _, err := library.Sessions(cmd.Context(), a.client)
			if err != nil {
				return serverError(err)
			}
			own := false
			for _, s := range sessions {
				own = own || s.Current && s.SessionID == args[0]
			}
			if err := a.client.RevokeSession(cmd.Context(), args[0]); err != nil {
				return serverError(err)
			}
			if own {
				if err := a.profile.Forget(); err != nil {
					return err
				}
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]any{"removed": args[0], "this_device": own})
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Session %s ended.\n", args[0])
			if own {
				fmt.Fprintln(cmd.OutOrStdout(), "It was this device's: sign in again with sealbox client login.")
			}
			return nil
		},
	}
}

func newClientSignOutEverywhereCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "sign-out-everywhere",
		Short: "End every session of the account, on every device, this one included",
		Long: `Ends every session of the account at once, this device's included: every device must sign in
again with the password. The server asks for a proof signed with the account's identity key,
which only a device holding the account's keys has, so that a stolen session token cannot
sign everyone out. The keys stay in the escrow; this device forgets its copy.`,
		Args: clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			n, err := library.SignOutEverywhere(cmd.Context(), a.profile, a.client, a.session, a.keys)
			if err != nil {
				return serverError(err)
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]int{"revoked": n})
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "Signed out everywhere: %d sessions ended, this device's included. Sign in again with sealbox client login.\n", n)
			return nil
		},
	}
}
