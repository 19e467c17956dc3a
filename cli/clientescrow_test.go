package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sealbox/cli/sealed"
)

// TestClientNoPasswordEscrow: an account made with --no-password-escrow
// sends the server an escrow no password opens (its passphrase slot is
// zeros); a password sign-in elsewhere is refused with what to do, and
// keeps no session; a linked device gets the keys; the password changes;
// recover with the recovery key keeps the escrow without a password slot;
// escrow --password-escrow switches it back, and a password sign-in then
// opens the keys.
func TestClientNoPasswordEscrow(t *testing.T) {
	rig := newClientRig(t)
	out := rig.mustRun(0, linkPassword+"\n"+linkPassword+"\n", "signup", rig.url, "--email", "family@example.org", "--password-stdin", "--no-password-escrow")
	recoveryKey := regexp.MustCompile(`[0-9A-Z]{4}(-[0-9A-Z]{4}){7}`).FindString(out)
	if recoveryKey == "" {
		t.Fatalf("signup printed no recovery key: %s", out)
	}
	rig.ts.SignCheckpoint(t)
	rig.mu.Lock()
	var sent []byte
	for _, b := range rig.bodies {
		if rest, ok := bytes.CutPrefix(b, []byte("/v1/auth/escrow\n")); ok {
			sent = rest
		}
	}
	rig.mu.Unlock()
	if len(sent) != sealed.EscrowSize || sealed.HasPassphraseSlot(sent) || !bytes.Equal(sent[31:123], make([]byte, 92)) {
		t.Fatalf("the escrow sent holds a password slot (%d bytes)", len(sent))
	}
	if out := rig.mustRun(0, "", "escrow", "--json"); strings.TrimSpace(out) != `{"password_escrow":false}` {
		t.Fatalf("escrow: %s", out)
	}

	phone := filepath.Join(t.TempDir(), "phone")
	_, errOut, code := rig.runAs(phone, linkPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin")
	if code != 2 || !strings.Contains(errOut, "this account keeps its keys under the recovery key only (no password escrow): get them from a device that holds them (sealbox client link there, then sealbox client login --code here)") {
		t.Fatalf("a password sign-in: exit %d: %s", code, errOut)
	}
	if _, err := os.Stat(filepath.Join(phone, "session.json")); !os.IsNotExist(err) {
		t.Fatalf("a sign-in that opened no keys kept a session: %v", err)
	}
	a, b, sasA, sasB, _ := linkStart(t, rig, phone, rig.url, false)
	if sasA != sasB {
		t.Fatalf("the devices show %s and %s", sasA, sasB)
	}
	a.say(sasB)
	a.wait(0)
	b.wait(0)
	if readKeys(t, phone).Master != readKeys(t, rig.profile).Master {
		t.Fatal("the linked device holds another master key")
	}

	const newPassword = "staple battery horse"
	rig.mustRun(0, linkPassword+"\n"+newPassword+"\n", "passwd", "--password-stdin")
	tablet := filepath.Join(t.TempDir(), "tablet")
	if _, errOut, code := rig.runAs(tablet, newPassword+"\n"+recoveryKey+"\n", "recover", rig.url, "--email", "family@example.org", "--password-stdin"); code != 0 {
		t.Fatalf("recover: exit %d: %s", code, errOut)
	}
	if readKeys(t, tablet).Master != readKeys(t, rig.profile).Master {
		t.Fatal("recover opened another master key")
	}
	if out, errOut, code := rig.runAs(tablet, "", "escrow", "--json"); code != 0 || strings.TrimSpace(out) != `{"password_escrow":false}` {
		t.Fatalf("escrow after recover: exit %d: %s%s", code, out, errOut)
	}
	_, errOut, code = rig.runAs(filepath.Join(t.TempDir(), "other"), newPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin")
	if code != 2 || !strings.Contains(errOut, "recovery key only") {
		t.Fatalf("a password sign-in after recover: exit %d: %s", code, errOut)
	}

	_, errOut, code = rig.run(linkPassword+"\n", "escrow", "--password-escrow", "--password-stdin")
	if code != 2 || !strings.Contains(errOut, "the server refused: the email or password is wrong (HTTP 401)") {
		t.Fatalf("switching with the old password: exit %d: %s", code, errOut)
	}
	if out := rig.mustRun(0, newPassword+"\n", "escrow", "--password-escrow", "--password-stdin"); !strings.Contains(out, "sealed under your password and your recovery key") {
		t.Fatalf("escrow --password-escrow: %s", out)
	}
	laptop := filepath.Join(t.TempDir(), "laptop")
	if _, errOut, code := rig.runAs(laptop, newPassword+"\n", "login", rig.url, "--email", "family@example.org", "--password-stdin"); code != 0 {
		t.Fatalf("a password sign-in with password escrow back: exit %d: %s", code, errOut)
	}
	if readKeys(t, laptop).Master != readKeys(t, rig.profile).Master {
		t.Fatal("the password opened another master key")
	}
}
