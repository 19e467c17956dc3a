package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	qrcode "github.com/skip2/go-qrcode"
	"github.com/spf13/cobra"

	"sealbox/cli/client"
	"sealbox/cli/library"
	"sealbox/cli/sealed"
	"sealbox/kv/fault"
)

// enrollCodeLife is how long a link code lives (server/PROTOCOL.md §6),
// measured on this device: the server's clock is not this one's.
const enrollCodeLife = 10 * time.Minute

func newClientLinkCmd(f *clientFlags) *cobra.Command {
	var fromStdin bool
	cmd := &cobra.Command{
		Use:   "link",
		Short: "Give a new device this account's keys: shows a code for it, then a string to compare",
		Long: `Shows a link code as a QR code and as text, with a 12-digit fallback to type. On the new
device, run sealbox client login URL --email EMAIL --code CODE. Both devices then show a
comparison string: type here the one the new device shows. Only when it equals this device's
are the keys sent, sealed to the new device's own key; the server relays them and cannot open
them. A string that differs means someone stands between the devices: nothing is sent.

The session must have shown the password recently; otherwise link asks for it again (with
--password-stdin: on the first line of standard input, the comparison string on the next).
With --json: {"code","fallback"} first, {"compare"} once the new device has joined, then the
comparison string the person saw on the new device is read from standard input.`,
		Args: clientArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := openAccount(f)
			if err != nil {
				return err
			}
			in := bufio.NewReader(cmd.InOrStdin())
			ctx := cmd.Context()
			code, err := a.client.IssueEnrollmentCode(ctx)
			if client.CodeOf(err) == fault.ECodeReauthRequired {
				password, perr := readPasswordFrom(cmd, in, fromStdin)
				if perr != nil {
					return refused(perr)
				}
				if err := a.client.Reauthenticate(ctx, sealed.LoginSecret(a.session.Email, password)); err != nil {
					return serverError(err)
				}
				code, err = a.client.IssueEnrollmentCode(ctx)
			}
			if err != nil {
				return serverError(err)
			}
			out := cmd.OutOrStdout()
			if f.json {
				emit(out, map[string]string{"code": code.Code, "fallback": code.TextFallback})
			} else {
				showLinkCode(out, a.session, code)
			}
			joined := func() {
				if !f.json {
					fmt.Fprintln(out, "The new device has joined.")
				}
			}
			confirm := func(sas string) (bool, error) {
				if f.json {
					emit(out, map[string]string{"compare": sas})
				} else {
					fmt.Fprintf(out, "Comparison string: %s\nType the string the new device shows: ", spaced(sas))
				}
				line, err := in.ReadString('\n')
				if err != nil && (err != io.EOF || line == "") {
					return false, refused(fmt.Errorf("the comparison string: read standard input: %w; no keys were sent", err))
				}
				return sealed.SameLinkSAS(strings.TrimSpace(line), sas), nil
			}
			if err := library.LinkDevice(ctx, a.client, a.keys, code.Code, time.Now().Add(enrollCodeLife), joined, confirm); err != nil {
				return serverError(err)
			}
			if f.json {
				emit(out, map[string]bool{"linked": true})
			} else {
				fmt.Fprintln(out, "Linked: the new device holds the account's keys.")
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&fromStdin, "password-stdin", false, "read the password, when it is asked for again, from the first line of standard input")
	return cmd
}

// readPasswordFrom reads the password from in's next line with fromStdin,
// else from the terminal.
func readPasswordFrom(cmd *cobra.Command, in *bufio.Reader, fromStdin bool) (string, error) {
	if !fromStdin {
		return readSecret(cmd, false, "Password (asked again to link a device)", false)
	}
	line, err := in.ReadString('\n')
	if err != nil && (err != io.EOF || line == "") {
		return "", fmt.Errorf("the password: read standard input: %w", err)
	}
	return strings.TrimRight(line, "\r\n"), nil
}

// showLinkCode prints the code as a QR code, as text and as its fallback,
// and what to run on the new device.
func showLinkCode(w io.Writer, s *library.Session, code client.EnrollmentCode) {
	if qr, err := qrcode.New(code.Code, qrcode.Medium); err == nil {
		fmt.Fprint(w, qr.ToSmallString(false))
	}
	fallback := code.TextFallback
	if len(fallback) == 12 {
		fallback = fallback[:4] + " " + fallback[4:8] + " " + fallback[8:]
	}
	fmt.Fprintf(w, "Link code: %s\nOr type:   %s\n\nOn the new device run:\n\n    sealbox client login %s --email %s --code %s\n\n"+
		"The code works once, for ten minutes. Waiting for the new device...\n", code.Code, fallback, s.Server, s.Email, code.Code)
}

// spaced writes a six-digit comparison string as two groups of three.
func spaced(sas string) string {
	if len(sas) != 6 {
		return sas
	}
	return sas[:3] + " " + sas[3:]
}

// isLinkCode reports whether a --code value is a link code (the full
// sbx_en_ spelling or the 12-digit fallback, server/PROTOCOL.md §6) rather
// than a second factor's six digits.
func isLinkCode(code string) bool {
	if strings.HasPrefix(code, "sbx_en_") {
		return true
	}
	return len(code) == 12 && strings.Trim(code, "0123456789") == ""
}

// splitCodes sorts login's --code values into the second factor's code
// and the link code; more than one of either is a usage error.
func splitCodes(codes []string) (totp, link string, err error) {
	for _, c := range codes {
		c = strings.ReplaceAll(strings.TrimSpace(c), " ", "")
		target := &totp
		if isLinkCode(c) {
			target = &link
		}
		if *target != "" {
			return "", "", errors.New("--code is given twice for the same thing: once the second factor's six digits, once the link code")
		}
		*target = c
	}
	return totp, link, nil
}
