package cli

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"sealbox/cli/admin"
	"sealbox/server"
	"sealbox/server/servertest"
)

// TestInvitations: `users invite` prints a code (and a link with --url)
// that registers one account in invite mode, with the invitation's quota;
// `users invites` lists what is outstanding, `users uninvite` revokes.
func TestInvitations(t *testing.T) {
	dir := t.TempDir()
	url := startServe(t, dir, func(c *server.Config) { c.Registration = server.RegistrationInvite; c.DefaultQuota = 1 << 30 })
	api := servertest.Client{BaseURL: url}
	out, _ := mustCLI(t, "", "users", "invite", "--email", "Ann@Example.org", "--quota", "2GiB", "--expires", "2d", "--url", "https://photos.example.org/", "--data", dir)
	code := regexp.MustCompile(`(?m)^code: (sbx_in_[A-Za-z0-9_-]{43})$`).FindStringSubmatch(out)
	if code == nil || !strings.Contains(out, "link: https://photos.example.org/#invite="+code[1]+"\n") || !strings.Contains(out, "for ann@example.org") {
		t.Fatalf("users invite:\n%s", out)
	}
	table, _ := mustCLI(t, "", "users", "invites", "--data", dir)
	if !strings.Contains(table, "ann@example.org") || !strings.Contains(table, "2 GiB") || strings.Contains(table, code[1]) {
		t.Fatalf("users invites:\n%s", table)
	}
	var listed []admin.Invitation
	raw, _ := mustCLI(t, "", "users", "invites", "--json", "--data", dir)
	// expires_at is kept in whole seconds, created_at is not: the two
	// days are short of 48 hours by created_at's fraction of a second.
	if err := json.Unmarshal([]byte(raw), &listed); err != nil || len(listed) != 1 || listed[0].Code != "" ||
		listed[0].ExpiresAt.Sub(listed[0].CreatedAt) <= 48*time.Hour-time.Second || listed[0].ExpiresAt.Sub(listed[0].CreatedAt) > 48*time.Hour {
		t.Fatalf("users invites --json: %v %s", err, raw)
	}
	register := func(email, code string) *servertest.Response {
		return api.Do(t, servertest.Req{Method: "POST", Path: "/v1/auth/register",
			Body: map[string]any{"email": email, "password": "longenough1", "invite_code": code}})
	}
	register("bob@example.org", code[1]).WantProblem(t, 403, "error.registration.invite_required")
	register("ann@example.org", code[1]).WantStatus(t, 200)
	register("ann@example.org", code[1]).WantProblem(t, 403, "error.registration.invite_required")
	if u := usersJSON(t, dir); len(u) != 1 || u[0].QuotaBytes != 2<<30 {
		t.Fatalf("the invited account: %+v", u)
	}
	// Revoked before use.
	raw, _ = mustCLI(t, "", "users", "invite", "--json", "--data", dir)
	var inv struct {
		admin.Invitation
		Link string `json:"link"`
	}
	if err := json.Unmarshal([]byte(raw), &inv); err != nil || inv.Code == "" || inv.Link != "" || inv.QuotaBytes != nil {
		t.Fatalf("users invite --json: %v %s", err, raw)
	}
	out, _ = mustCLI(t, "", "users", "uninvite", inv.ID, "--data", dir)
	if !strings.Contains(out, "invitation "+inv.ID+" revoked") {
		t.Fatalf("users uninvite: %q", out)
	}
	register("cy@example.org", inv.Code).WantProblem(t, 403, "error.registration.invite_required")
	if _, _, err := runCLI(t, "", "users", "uninvite", inv.ID, "--data", dir); err == nil || !strings.Contains(err.Error(), "no outstanding invitation") {
		t.Fatalf("uninvite twice: %v", err)
	}
	for _, bad := range [][]string{{"--expires", "0d"}, {"--expires", "soon"}, {"--quota", "lots"}, {"--url", "photos.example.org"}, {"--email", "nobody"}} {
		if _, _, err := runCLI(t, "", append([]string{"users", "invite", "--data", dir}, bad...)...); err == nil {
			t.Errorf("users invite %v was accepted", bad)
		}
	}
	if list, _ := mustCLI(t, "", "users", "invites", "--json", "--data", dir); strings.TrimSpace(list) != "[]" {
		t.Fatalf("a refused invite was recorded: %s", list)
	}
}

// TestInvitationsDirectlyOnTheStore: with no server running, an invitation
// is written to the store and honoured once a server starts.
func TestInvitationsDirectlyOnTheStore(t *testing.T) {
	dir := t.TempDir()
	out, how := mustCLI(t, "", "users", "invite", "--data", dir)
	code := regexp.MustCompile(`(?m)^code: (\S+)$`).FindStringSubmatch(out)
	if code == nil || !strings.Contains(how, "directly") {
		t.Fatalf("users invite on the store: %q %q", out, how)
	}
	url := startServe(t, dir, func(c *server.Config) { c.Registration = server.RegistrationInvite })
	servertest.Client{BaseURL: url}.Do(t, servertest.Req{Method: "POST", Path: "/v1/auth/register",
		Body: map[string]any{"email": "dee@example.org", "password": "longenough1", "invite_code": code[1]}}).WantStatus(t, 200)
}

func TestParseDays(t *testing.T) {
	for in, want := range map[string]time.Duration{"7d": 7 * 24 * time.Hour, "1d": 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute} {
		if got, err := parseDays(in); err != nil || got != want {
			t.Errorf("parseDays(%q): got %v %v, want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "0d", "-1d", "0", "d", "7 d", "1.5d", "99999d", "-1h"} {
		if got, err := parseDays(in); err == nil {
			t.Errorf("parseDays(%q): got %v, want an error", in, got)
		}
	}
}
