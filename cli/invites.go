package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"sealbox/cli/admin"
)

// defaultInviteExpiry is how long an invitation stays valid unless
// --expires says otherwise.
const defaultInviteExpiry = 7 * 24 * time.Hour

// newUsersInviteCmd is `users invite`: a single-use invitation to register
// while the server runs with --registration invite.
func newUsersInviteCmd(data *Location) *cobra.Command {
	var email, expires, quota, link string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "invite",
		Short: "Issue a single-use invitation to register (--registration invite); prints its code, and a link with --url",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts := admin.InviteOptions{Email: email}
			var err error
			if opts.Expires, err = parseDays(expires); err != nil {
				return fmt.Errorf("--expires: %w", err)
			}
			if cmd.Flags().Changed("quota") {
				n, err := ParseSize(quota)
				if err != nil {
					return fmt.Errorf("--quota: %w", err)
				}
				opts.QuotaBytes = &n
			}
			base, err := inviteBase(link)
			if err != nil {
				return err
			}
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				inv, err := a.Invite(cmd.Context(), opts)
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(struct {
						admin.Invitation
						Link string `json:"link,omitempty"`
					}{inv, inviteLink(base, inv.Code)})
				}
				printInvitation(cmd.OutOrStdout(), inv, inviteLink(base, inv.Code))
				return nil
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&email, "email", "", "the only address that may register with it (default: any)")
	f.StringVar(&expires, "expires", "7d", "how long it stays valid: days (7d) or a Go duration (36h)")
	f.StringVar(&quota, "quota", "", "the new account's quota instead of the server's --default-quota, e.g. 50GiB (0 = unlimited)")
	f.StringVar(&link, "url", "", "the server's public address (https://photos.example.org), to print a link a client opens")
	f.BoolVar(&asJSON, "json", false, "print JSON instead of text")
	return cmd
}

// newUsersInvitesCmd is `users invites`: the outstanding invitations.
func newUsersInvitesCmd(data *Location) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use: "invites", Short: "List the outstanding invitations (never their codes)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withAdmin(cmd, data, readOnly, func(a admin.Admin) error {
				list, err := a.Invites(cmd.Context())
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(list)
				}
				tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "ID\tEMAIL\tCREATED\tEXPIRES\tQUOTA")
				for _, inv := range list {
					fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", inv.ID, orText(inv.Email, "any"), inv.CreatedAt.Format(time.RFC3339),
						inv.ExpiresAt.Format(time.RFC3339), inviteQuotaText(inv.QuotaBytes))
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON instead of a table")
	return cmd
}

// newUsersUninviteCmd is `users uninvite ID`.
func newUsersUninviteCmd(data *Location) *cobra.Command {
	return &cobra.Command{
		Use: "uninvite ID", Short: "Revoke an outstanding invitation", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withAdmin(cmd, data, readWrite, func(a admin.Admin) error {
				if err := a.Uninvite(cmd.Context(), args[0]); err != nil {
					return err
				}
				fmt.Fprintf(cmd.OutOrStdout(), "invitation %s revoked\n", args[0])
				return nil
			})
		},
	}
}

func printInvitation(w io.Writer, inv admin.Invitation, link string) {
	fmt.Fprintf(w, "invitation %s, for %s, valid until %s, quota %s\n", inv.ID, orText(inv.Email, "any email"),
		inv.ExpiresAt.Format(time.RFC3339), inviteQuotaText(inv.QuotaBytes))
	fmt.Fprintf(w, "code: %s\n", inv.Code)
	if link != "" {
		fmt.Fprintf(w, "link: %s\n", link)
	}
	fmt.Fprintln(w, "It works once and is shown only now: the server keeps its hash.")
}

// orText is s, or otherwise when s is empty.
func orText(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

func inviteQuotaText(q *int64) string {
	if q == nil {
		return "the server's default"
	}
	return quotaText(*q)
}

// inviteBase checks --url: an http(s) address without a query or fragment;
// "" when not given.
func inviteBase(raw string) (string, error) {
	if raw == "" {
		return "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("--url must be the server's address, such as https://photos.example.org, not %q", raw)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}

// inviteLink is the link a client opens to register with code: the
// server's address with the code in the fragment, which a browser never
// sends to any server (server/PROTOCOL.md §2); "" without an address.
func inviteLink(base, code string) string {
	if base == "" {
		return ""
	}
	return base + "/#invite=" + code
}

// parseDays reads a positive duration in days ("7d") or Go's form ("36h").
func parseDays(s string) (time.Duration, error) {
	var d time.Duration
	var err error
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		days, err = strconv.Atoi(n)
		d = time.Duration(days) * 24 * time.Hour
		if days > 100*365 {
			err = fmt.Errorf("%q is more than a century", s)
		}
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("want a positive number of days (7d) or a duration (36h), not %q", s)
	}
	return d, nil
}
