package cli

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"sealbox/server"
)

// TestAdminSocketLeavesAnAuditLine: an admin command through the running
// server's socket leaves a line in the server's log naming the command and
// the account's id, never the password or the email address.
func TestAdminSocketLeavesAnAuditLine(t *testing.T) {
	var log syncBuffer
	dir := t.TempDir()
	startServe(t, dir, func(c *server.Config) { c.Log = zerolog.New(&log) })
	const secret = "a long enough password"
	mustCLI(t, secret+"\n", "users", "add", "audited@example.org", "--password-stdin", "--data", dir)
	mustCLI(t, "", "users", "set-quota", "audited@example.org", "1GiB", "--data", dir)
	id := ""
	for _, u := range usersJSON(t, dir) {
		if u.Email == "audited@example.org" {
			id = u.UserID
		}
	}
	var commands []string
	for _, line := range strings.Split(log.String(), "\n") {
		var e map[string]any
		if json.Unmarshal([]byte(line), &e) != nil || e["event"] != "admin" {
			continue
		}
		commands = append(commands, e["command"].(string))
		if (e["command"] == "users add" || e["command"] == "users set-quota") && e["user_id"] != id {
			t.Errorf("the audit line of %s names account %v, want %s", e["command"], e["user_id"], id)
		}
	}
	if strings.Join(commands, ",") != "users add,users set-quota,users list" {
		t.Fatalf("audit lines for %v, want users add, users set-quota, users list:\n%s", commands, log.String())
	}
	if strings.Contains(log.String(), secret) || strings.Contains(log.String(), "audited@example.org") {
		t.Fatal("an audit line holds the password or the email address")
	}
}
