package cli

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"sealbox/cli/library"
	"sealbox/cli/sealed"
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
			dir, err := a.readDirectory(cmd.Context())
			if err != nil && !errors.Is(err, errNoDirectory) {
				return serverError(err)
			}
			keys := make([]directoryDeviceView, len(dir.Devices))
			for i, d := range dir.Devices {
				sum := sha256.Sum256(d.PublicKey)
				keys[i] = directoryDeviceView{DeviceID: d.DeviceID, KeyFingerprint: hex.EncodeToString(sum[:8]), Current: d.DeviceID == a.session.DeviceID}
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]any{"sessions": sessions, "cohorts": cohorts,
					"directory": map[string]any{"version": dir.Version, "devices": keys}})
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
			if err := w.Flush(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "\nDevices holding the keys (directory version %d, proven in the transparency log):\n", dir.Version)
			w = tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "DEVICE\tKEY\t")
			for _, k := range keys {
				mark := ""
				if k.Current {
					mark = "this device"
				}
				fmt.Fprintf(w, "%s\t%s\t%s\n", k.DeviceID, k.KeyFingerprint, mark)
			}
			return w.Flush()
		},
	}
	cmd.AddCommand(newClientDevicesRemoveCmd(f))
	return cmd
}

// directoryDeviceView is a device of the directory as devices shows it:
// its key by the first 8 bytes of its SHA-256, in hex.
type directoryDeviceView struct {
	DeviceID       string `json:"device_id"`
	KeyFingerprint string `json:"key_fingerprint"`
	Current        bool   `json:"current"`
}

func newClientDevicesRemoveCmd(f *clientFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "remove SESSION-ID|DEVICE-ID",
		Short: "End one session of the account, or remove a device: its sessions end and a directory without it is published",
		Args:  clientArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			// ID names a session, or a device of the directory (and its
			// sessions); what it names is found before anything ends.
			id := args[0]
			sessions, _, err := library.Sessions(cmd.Context(), a.client)
			if err != nil {
				return serverError(err)
			}
			dir, err := a.readDirectory(cmd.Context())
			if err != nil && !errors.Is(err, errNoDirectory) {
				return serverError(err)
			}
			device := ""
			for _, d := range dir.Devices {
				if d.DeviceID == id {
					device = id
				}
			}
			var ending []string
			own := false
			for _, s := range sessions {
				if s.SessionID == id || device != "" && s.DeviceID == device {
					ending = append(ending, s.SessionID)
					own = own || s.Current
					if device == "" && s.DeviceID != "" && slices.ContainsFunc(dir.Devices, func(d sealed.DirectoryDevice) bool { return d.DeviceID == s.DeviceID }) {
						device = s.DeviceID
					}
				}
			}
			if device == "" && len(ending) == 0 {
				// Nothing of the account's: the server says what it is.
				ending = []string{id}
			}
			if device != "" {
				if err := a.publishDevices(cmd.Context(), func(ds []sealed.DirectoryDevice) []sealed.DirectoryDevice { return withoutDevice(ds, device) }); err != nil {
					return serverError(err)
				}
			}
			for _, s := range ending {
				if err := a.client.RevokeSession(cmd.Context(), s); err != nil {
					return serverError(err)
				}
			}
			if own {
				if err := a.profile.Forget(); err != nil {
					return err
				}
			}
			if f.json {
				emit(cmd.OutOrStdout(), map[string]any{"sessions_ended": len(ending), "device_removed": device, "this_device": own})
				return nil
			}
			if device != "" {
				fmt.Fprintf(cmd.OutOrStdout(), "Device %s removed from the account's directory.\n", device)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s ended.\n", count(len(ending), "session"))
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
