package ratelimit

import (
	"time"

	"sealbox/kv/fault"
)

// Redeem counts refused enrollment-code redemptions in memory, not in the store: every
// refusal is attacker-driven, and a store write (an fsync) per refusal would
// hand an attacker a cheap way to load the disk. The price is that a restart
// forgets the counts, which is worth at most one more window of guesses to
// someone who can also restart the server.
type Redeem struct {
	byAddr   *Window
	fallback *Window
}

// NewRedeem allows perAddr refusals per client address and fallback
// refusals of fallback-shaped codes across all addresses, each within span.
func NewRedeem(perAddr, fallback int, span time.Duration, now func() time.Time) *Redeem {
	return &Redeem{
		byAddr:   NewWindow(perAddr, span, now),
		fallback: NewWindow(fallback, span, now),
	}
}

// Admit books a redemption attempt from addr as a refusal in advance (so
// parallel guesses cannot overrun a limit while they run) or refuses it
// (error.rate_limited with its wait). The caller runs the returned refund when the attempt turns out not to
// be a refusal.
func (l *Redeem) Admit(addr string, fallback bool) (refund func(), err error) {
	at, wait, ok := l.byAddr.Spend(addr)
	if !ok {
		return nil, &fault.Error{Code: fault.ECodeRateLimited, Message: "too many refused redemptions from this address", RetryAfter: wait}
	}
	refundAddr := func() { l.byAddr.Refund(addr, at) }
	if !fallback {
		return refundAddr, nil
	}
	fat, wait, ok := l.fallback.Spend("")
	if !ok {
		refundAddr()
		return nil, &fault.Error{Code: fault.ECodeRateLimited, Message: "too many refused numeric codes; use the full code", RetryAfter: wait}
	}
	return func() { refundAddr(); l.fallback.Refund("", fat) }, nil
}
