package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"sealbox/cli/admin"
	"sealbox/cli/sealed"
)

func newUsersCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "users", Short: "List and manage accounts"}
	data := addDataFlag(cmd)
	cmd.AddCommand(newUsersListCmd(data), newUsersAddCmd(data), newReset2FACmd(data), newResetDirectoryCmd(data),
		newSetDisabledCmd(data, "disable", "Disable an account and close its sessions (login answers 423)", true, "disabled"),
		newSetDisabledCmd(data, "enable", "Enable a disabled account", false, "enabled"),
		newSetQuotaCmd(data), newSetPasswordCmd(data), newUsersDeleteCmd(data), newUsersInviteCmd(data), newUsersInvitesCmd(data), newUsersUninviteCmd(data))
	return cmd
}

// newUsersListCmd is `users list`: every account, as a table or JSON.
func newUsersListCmd(data *Location) *cobra.Command {
	var asJSON bool
	list := &cobra.Command{
		Use: "list", Short: "List every account", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, data, readOnly, func(a admin.Admin) error {
				users, err := a.Users(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(users)
				}
				return printUsers(cmd.OutOrStdout(), users)
			})
		},
	}
	list.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return list
}

// newUsersAddCmd is `users add EMAIL`, which works while registration is
// closed.
func newUsersAddCmd(data *Location) *cobra.Command {
	var passwordStdin bool
	add := &cobra.Command{
		Use: "add EMAIL", Short: "Create an account (works while registration is closed)", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := readPassword(cmd, passwordStdin)
			if err != nil {
				return err
			}
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				u, err := a.AddUser(cmd.Context(), args[0], pw)
				return report(cmd, u, err, "added")
			})
		},
	}
	add.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input")
	return add
}

// newSetDisabledCmd is `users disable` or `users enable`, as disabled says.
func newSetDisabledCmd(data *Location, use, short string, disabled bool, verb string) *cobra.Command {
	return &cobra.Command{
		Use: use + " EMAIL", Short: short, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				u, err := a.SetDisabled(cmd.Context(), args[0], disabled)
				return report(cmd, u, err, verb)
			})
		},
	}
}

// newSetQuotaCmd is `users set-quota EMAIL SIZE`.
func newSetQuotaCmd(data *Location) *cobra.Command {
	return &cobra.Command{
		Use: "set-quota EMAIL SIZE", Short: "Cap the bytes an account may hold (0 = unlimited), e.g. 50GiB", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := ParseSize(args[1])
			if err != nil {
				return err
			}
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				u, err := a.SetQuota(cmd.Context(), args[0], n)
				return report(cmd, u, err, "quota set for")
			})
		},
	}
}

// newSetPasswordCmd is `users set-password EMAIL`: the operator's reset for
// a forgotten password. The password comes from standard input or a prompt,
// never from an argument (which other users of the host can read).
func newSetPasswordCmd(data *Location) *cobra.Command {
	var passwordStdin, raw bool
	cmd := &cobra.Command{
		Use:   "set-password EMAIL",
		Short: "Set a new password for an account (forgotten password): closes its sessions and pending sign-ins, clears its lockout",
		Long: `Sets the password the person signs in with from now on. sealbox client never sends a
password itself but a login secret derived from it and the email (cli/sealed/FORMAT.md §5.3),
so the server is given that secret of the new password; with --raw it is given the password as
typed, for a client of the API that sends the password itself.

The photos' keys do not change and the server cannot open them: the person opens them again
with their recovery key (sealbox client recover) or another linked device.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			pw, err := readPassword(cmd, passwordStdin)
			if err != nil {
				return err
			}
			if len(pw) < 8 {
				return fmt.Errorf("the password must be at least 8 characters")
			}
			if !raw {
				pw = sealed.LoginSecret(args[0], pw)
			}
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				u, err := a.SetPassword(cmd.Context(), args[0], pw)
				if err := report(cmd, u, err, "password set for"); err != nil {
					return err
				}
				fmt.Fprintln(cmd.OutOrStdout(), "The photos' keys are unchanged and the server cannot open them: with sealbox client, the person signs in with the new password and opens them with the recovery key (sealbox client recover), or from another linked device.")
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&passwordStdin, "password-stdin", false, "read the password from standard input")
	cmd.Flags().BoolVar(&raw, "raw", false, "give the server the password as typed, for a client that sends its password itself (not sealbox client)")
	return cmd
}

// newUsersDeleteCmd is `users delete EMAIL`: an account deleted for good,
// after the operator types its email again (or --yes, for scripts).
func newUsersDeleteCmd(data *Location) *cobra.Command {
	var yes bool
	cmd := &cobra.Command{
		Use:   "delete EMAIL",
		Short: "Delete an account for good: sessions, albums, share links, escrow, directory; its blobs go to gc",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if !yes {
				fmt.Fprintf(cmd.ErrOrStderr(), "This deletes %s and every photo only it holds, for good. Type the email again to confirm: ", args[0])
				line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
				if err != nil && (err != io.EOF || line == "") {
					return fmt.Errorf("not confirmed; nothing deleted")
				}
				if typed := strings.ToLower(strings.TrimSpace(line)); typed != strings.ToLower(strings.TrimSpace(args[0])) {
					return fmt.Errorf("%q is not %s: not confirmed; nothing deleted", strings.TrimSpace(line), args[0])
				}
			}
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				u, err := a.DeleteUser(cmd.Context(), args[0])
				if err := report(cmd, u, err, "deleted"); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "%d blobs are held by nobody now (sealbox gc removes them); the deletion is transparency log record %d\n", u.UnheldBlobs, *u.LogIndex)
				return nil
			})
		},
	}
	cmd.Flags().BoolVar(&yes, "yes", false, "delete without asking to confirm (scripts)")
	return cmd
}

// newReset2FACmd is `users reset-2fa EMAIL`: for a lost authenticator.
func newReset2FACmd(data *Location) *cobra.Command {
	return &cobra.Command{
		Use: "reset-2fa EMAIL", Short: "Remove an account's second factor (lost authenticator) and close its sessions", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				u, err := a.ResetSecondFactor(cmd.Context(), args[0])
				if err == nil && u.Unchanged {
					fmt.Fprintf(cmd.OutOrStdout(), "%s (%s) has no second factor; nothing changed\n", u.Email, u.UserID)
					return nil
				}
				return report(cmd, u, err, "second factor removed for")
			})
		},
	}
}

// newResetDirectoryCmd is `users reset-directory EMAIL`: the operator's undo
// of a pinned identity key, recorded in the transparency log.
func newResetDirectoryCmd(data *Location) *cobra.Command {
	return &cobra.Command{
		Use:   "reset-directory EMAIL",
		Short: "Clear an account's device directory and pinned identity key (recorded in the transparency log) and close its sessions",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				u, err := a.ResetDirectory(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				if u.Unchanged || u.LogIndex == nil {
					fmt.Fprintf(cmd.OutOrStdout(), "%s (%s) has no directory; nothing to clear, %s closed\n", u.Email, u.UserID, count(u.RevokedSessions, "session"))
					return nil
				}
				report(cmd, u, nil, "directory and pinned identity key cleared for")
				fmt.Fprintf(cmd.OutOrStdout(), "the reset is transparency log record %d\n", *u.LogIndex)
				return nil
			})
		},
	}
}

func report(cmd *cobra.Command, u admin.User, err error, verb string) error {
	if err != nil {
		return err
	}
	line := fmt.Sprintf("%s %s (%s)", verb, u.Email, u.UserID)
	if u.RevokedSessions > 0 {
		line += "; " + count(u.RevokedSessions, "session") + " closed"
	}
	fmt.Fprintln(cmd.OutOrStdout(), line)
	return nil
}

func printUsers(w io.Writer, users []admin.User) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EMAIL\tUSER ID\tCREATED\tSESSIONS\t2FA\tSTATUS\tALBUMS\tBLOBS\tSTORED\tQUOTA\tUSED")
	for _, u := range users {
		status := "active"
		switch {
		case u.Disabled:
			status = "disabled"
		case u.Locked:
			status = "locked"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", u.Email, u.UserID, u.CreatedAt.Format(time.DateOnly),
			u.LiveSessions, onOff(u.SecondFactor), status, u.Albums, u.BlobsHeld, FormatSize(u.BytesHeld), quotaText(u.QuotaBytes), usedText(u.BytesHeld, u.QuotaBytes))
	}
	return tw.Flush()
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

func quotaText(q int64) string {
	if q == 0 {
		return "unlimited"
	}
	return FormatSize(q)
}

// usedText is the share of its quota an account holds, in whole percent
// rounded down (so 100% means full), "-" without a quota.
func usedText(held, quota int64) string {
	if quota == 0 {
		return "-"
	}
	return fmt.Sprintf("%d%%", int64(float64(held)/float64(quota)*100))
}

// readPassword reads a new account's password: from standard input with
// --password-stdin (first line), otherwise from the terminal without echo,
// asked twice.
func readPassword(cmd *cobra.Command, fromStdin bool) (string, error) {
	if fromStdin {
		line, err := bufio.NewReader(cmd.InOrStdin()).ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			return "", fmt.Errorf("read the password from standard input: %w", err)
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	fd := int(os.Stdin.Fd())
	if !term.IsTerminal(fd) {
		return "", fmt.Errorf("standard input is not a terminal: pass --password-stdin to read the password from it")
	}
	ask := func(prompt string) (string, error) {
		fmt.Fprint(cmd.ErrOrStderr(), prompt)
		b, err := term.ReadPassword(fd)
		fmt.Fprintln(cmd.ErrOrStderr())
		return string(b), err
	}
	pw, err := ask("Password: ")
	if err != nil {
		return "", err
	}
	again, err := ask("Again: ")
	if err != nil {
		return "", err
	}
	if pw != again {
		return "", fmt.Errorf("the passwords differ")
	}
	return pw, nil
}
