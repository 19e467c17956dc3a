package library

import (
	"context"
	"encoding/base64"

	"sealbox/cli/client"
	"sealbox/server/hybridsig"
)

// Sessions reads every page of the account's session ledger, and the
// cohorts it was seen under.
func Sessions(ctx context.Context, c *client.Client) ([]client.Session, []client.Cohort, error) {
	var sessions []client.Session
	var cohorts []client.Cohort
	cursor := ""
	for {
		page, err := c.Sessions(ctx, cursor)
		if err != nil {
			return nil, nil, err
		}
		sessions = append(sessions, page.Sessions...)
		cohorts = append(cohorts, page.Cohorts...)
		if page.NextCursor == "" {
			return sessions, cohorts, nil
		}
		cursor = page.NextCursor
	}
}

// SignOutEverywhere ends every session of the account, this device's
// included, with the revoke-all ceremony (server/PROTOCOL.md §4): a
// challenge, signed with the account's identity key, which only a device
// holding the keys has, so a stolen session token cannot do it. It returns
// how many sessions ended; the profile forgets the session and the keys.
func SignOutEverywhere(ctx context.Context, p *Profile, c *client.Client, s *Session, keys *Keys) (int, error) {
	challenge, err := c.RevokeAllChallenge(ctx)
	if err != nil {
		return 0, err
	}
	proof := keys.Identity.Identity().Sign(hybridsig.RevokeAllSigningBytes(s.UserID, challenge))
	n, err := c.RevokeAll(ctx, challenge, base64.StdEncoding.EncodeToString(proof))
	if err != nil {
		return 0, err
	}
	return n, p.Forget()
}
