package kv

import (
	"bytes"
	"testing"
	"time"
)

// TestAccountFactorsKeepTheStoredBytes: an account's list of factors is
// stored under the keys the TOTP secret had before (6 confirmed, 7
// pending), so a record written before the list reads back with its
// factors and writes back byte for byte: no format change.
func TestAccountFactorsKeepTheStoredBytes(t *testing.T) {
	name := "Alice"
	old := accountRecord{
		ID: "acct-1", Email: "alice@example.com", PasswordHash: "h", DisplayName: &name,
		CreatedAt: time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC), TOTPSecret: []byte("confirmed"),
		TOTPPending: []byte("pending"), TOTPLastStep: 42, Disabled: true, QuotaBytes: 7,
	}
	stored := encode(&old)
	var rec accountRecord
	if err := decode(stored, &rec); err != nil {
		t.Fatal(err)
	}
	a := rec.account()
	if f := a.Factor(FactorTOTP, true); f == nil || string(f.Sealed) != "confirmed" {
		t.Fatalf("confirmed factor: got %+v", f)
	}
	if f := a.Factor(FactorTOTP, false); f == nil || string(f.Sealed) != "pending" {
		t.Fatalf("pending factor: got %+v", f)
	}
	if len(a.Factors) != 2 || !a.HasConfirmedFactor() {
		t.Fatalf("factors: got %+v", a.Factors)
	}
	if got := encode(newAccountRecord(a)); !bytes.Equal(got, stored) {
		t.Fatalf("written back:\n got %x\nwant %x", got, stored)
	}
	a.Factors = nil
	if got, want := encode(newAccountRecord(a)), encode(&accountRecord{
		ID: old.ID, Email: old.Email, PasswordHash: old.PasswordHash, DisplayName: old.DisplayName,
		CreatedAt: old.CreatedAt, TOTPLastStep: 42, Disabled: true, QuotaBytes: 7,
	}); !bytes.Equal(got, want) {
		t.Fatalf("without factors:\n got %x\nwant %x", got, want)
	}
}
