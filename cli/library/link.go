package library

import (
	"context"
	"errors"
	"fmt"
	"time"

	"sealbox/cli/client"
	"sealbox/cli/sealed"
	"sealbox/kv/fault"
)

// Linking a second device (cli/sealed/FORMAT.md §13): the signed-in device
// issues an enrollment code; the new device signs in with the password,
// redeems the code and the two meet on the relay channel. They exchange
// public keys (the new device commits to its own first), each shows the
// comparison string, and only when the person confirms on the old device
// that both show the same does it send the master key, sealed to the new
// device's key (§10). The server relays opaque text and never holds a key.

// LinkPoll is how often a linking device asks the relay whether the other
// has written.
var LinkPoll = 200 * time.Millisecond

// The refusals of a link, each said so that the person knows what to do.
var (
	ErrLinkCodeRefused   = errors.New("the link code is unknown, expired or already used: run sealbox client link again on the signed-in device")
	ErrLinkFallbackLimit = errors.New("the server refuses codes for now, after too many wrong ones (the 12 digits first): give the full code (shown beside the QR code) instead, or wait as long as the server says")
	ErrLinkCodeExpired   = errors.New("the link code expired before a new device used it: run sealbox client link again")
	ErrLinkChannelGone   = errors.New("the link channel expired or was closed before the exchange finished; no keys were sent: start again with sealbox client link")
	ErrLinkMismatch      = errors.New("the comparison strings differ: someone may stand between the two devices; no keys were sent")
	ErrLinkDeclined      = errors.New("the other device declined: the comparison strings differed there, so no keys were sent")
	ErrLinkTampered      = errors.New("the new device's key is not the one it committed to: the link was tampered with; no keys were sent")
	ErrLinkUndecryptable = errors.New("the keys sent over the link do not open on this device: the link was tampered with, or the sender is no device of this account")
	ErrLinkFailed        = errors.New("the new device could not open the keys it was sent; it holds none: start again with sealbox client link")
)

// relayPeer is one side of a link exchange on a channel: it writes to the
// other side's mailbox and reads its own, in arrival order.
type relayPeer struct {
	c             *client.Client
	channel       string
	inbox, outbox string
	queue         []string
	// What the other side's abort means here, by its reason.
	abortMismatch, abortFailed error
}

func (p *relayPeer) send(ctx context.Context, m sealed.LinkMessage) error {
	return channelErr(p.c.RelayPost(ctx, p.channel, p.outbox, m.Marshal()))
}

// abort tells the other side why the exchange ends; its failure changes
// nothing (the channel expires on its own).
func (p *relayPeer) abort(ctx context.Context, reason string) {
	_ = p.send(ctx, sealed.LinkMessage{Type: sealed.LinkTypeAbort, Reason: reason})
}

// next waits for the other side's next message, which must be of type
// want; an abort from the other side is its reason's error.
func (p *relayPeer) next(ctx context.Context, want string) (sealed.LinkMessage, error) {
	for len(p.queue) == 0 {
		got, err := p.c.RelayDrain(ctx, p.channel, p.inbox)
		if err != nil {
			return sealed.LinkMessage{}, channelErr(err)
		}
		p.queue = got
		if len(got) == 0 {
			if err := sleep(ctx, LinkPoll); err != nil {
				return sealed.LinkMessage{}, err
			}
		}
	}
	payload := p.queue[0]
	p.queue = p.queue[1:]
	m, err := sealed.ParseLinkMessage(payload)
	if err != nil {
		return m, fmt.Errorf("the other device sent what no sealbox client sends (%v): the link was tampered with; no keys were sent", err)
	}
	if m.Type == sealed.LinkTypeAbort {
		if m.Reason == sealed.AbortMismatch {
			return m, p.abortMismatch
		}
		return m, p.abortFailed
	}
	if m.Type != want {
		return m, fmt.Errorf("the other device sent a %q message where a %q was due: the link was tampered with; no keys were sent", m.Type, want)
	}
	return m, nil
}

// channelErr names a channel that is gone.
func channelErr(err error) error {
	if client.CodeOf(err) == fault.ECodeRelayChannelNotFound {
		return ErrLinkChannelGone
	}
	return err
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// LinkDevice is the signed-in device's side, for the code it issued (which
// expires at expires): it waits for a new device to redeem the code, shows
// the comparison string through confirm, which answers whether the person
// confirmed that the new device shows the same, and only then sends the
// master key sealed to the new device's key. It returns when the new device
// said it holds the keys, and closes the channel.
func LinkDevice(ctx context.Context, c *client.Client, keys *Keys, code string, expires time.Time, joined func(), confirm func(sas string) (bool, error)) error {
	var ch client.Channel
	for {
		var err error
		ch, err = c.EnrollmentChannel(ctx, code)
		if err == nil {
			break
		}
		if client.CodeOf(err) != fault.ECodeRelayChannelNotFound {
			return err
		}
		if !time.Now().Before(expires) {
			return ErrLinkCodeExpired
		}
		if err := sleep(ctx, LinkPoll); err != nil {
			return err
		}
	}
	p := &relayPeer{c: c, channel: ch.ChannelID, inbox: client.ToInitiator, outbox: client.ToEnrollee,
		abortMismatch: ErrLinkDeclined, abortFailed: ErrLinkFailed}
	commit, err := p.next(ctx, sealed.LinkTypeCommit)
	if err != nil {
		return err
	}
	joined()
	ours, err := sealed.NewDeviceKey()
	if err != nil {
		return err
	}
	if err := p.send(ctx, sealed.LinkMessage{Type: sealed.LinkTypeKey, PublicKey: ours.PublicKey()}); err != nil {
		return err
	}
	reveal, err := p.next(ctx, sealed.LinkTypeReveal)
	if err != nil {
		return err
	}
	if !sealed.CheckLinkCommitment(commit.Commit, reveal.PublicKey) {
		p.abort(ctx, sealed.AbortFailed)
		return ErrLinkTampered
	}
	same, err := confirm(sealed.LinkSAS(reveal.PublicKey, ours.PublicKey()))
	if err != nil || !same {
		p.abort(ctx, sealed.AbortMismatch)
		if err != nil {
			return err
		}
		return ErrLinkMismatch
	}
	box, err := sealed.SealMasterKeyToDevice(reveal.PublicKey, keys.Master)
	if err != nil {
		p.abort(ctx, sealed.AbortFailed)
		return fmt.Errorf("the new device's key: %w", err)
	}
	if err := p.send(ctx, sealed.LinkMessage{Type: sealed.LinkTypeKeys, Sealed: box}); err != nil {
		return err
	}
	if _, err := p.next(ctx, sealed.LinkTypeDone); err != nil {
		return err
	}
	// Done: the channel is the initiator's to close. After a refusal it is
	// left open, so that the other side reads why before it expires (15
	// minutes); a close that fails leaves it to expire too.
	_ = c.CloseChannel(ctx, ch.ChannelID)
	return nil
}

// LoginByLink is the new device's side: it signs in with the password
// (and the second factor's code), redeems the link code, shows the
// comparison string through show, and waits for the master key. The key is
// accepted only when it opens the identity slot of the account's escrow,
// so a key from anyone but a device of the account is refused. On any
// failure the device is signed out again and holds nothing.
func LoginByLink(ctx context.Context, p *Profile, c *client.Client, email, password, totp, code string, show func(sas string)) (err error) {
	if err := refuseUnfinished(p); err != nil {
		return err
	}
	if err := signIn(ctx, p, c, email, password, totp); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = c.Logout(context.WithoutCancel(ctx))
			_ = p.Forget()
		}
	}()
	ch, err := c.RedeemEnrollmentCode(ctx, code)
	switch client.CodeOf(err) {
	case "":
	case fault.ECodeEnrollmentCodeRefused:
		return ErrLinkCodeRefused
	case fault.ECodeRateLimited:
		if isFallback(code) {
			return fmt.Errorf("%w (%v)", ErrLinkFallbackLimit, err)
		}
		return err
	default:
		return err
	}
	if err != nil {
		return err
	}
	peer := &relayPeer{c: c, channel: ch.ChannelID, inbox: client.ToEnrollee, outbox: client.ToInitiator,
		abortMismatch: ErrLinkDeclined, abortFailed: ErrLinkTampered}
	device, err := sealed.NewDeviceKey()
	if err != nil {
		return err
	}
	if err := peer.send(ctx, sealed.LinkMessage{Type: sealed.LinkTypeCommit, Commit: sealed.LinkCommitment(device.PublicKey())}); err != nil {
		return err
	}
	key, err := peer.next(ctx, sealed.LinkTypeKey)
	if err != nil {
		return err
	}
	if err := peer.send(ctx, sealed.LinkMessage{Type: sealed.LinkTypeReveal, PublicKey: device.PublicKey()}); err != nil {
		return err
	}
	show(sealed.LinkSAS(device.PublicKey(), key.PublicKey))
	box, err := peer.next(ctx, sealed.LinkTypeKeys)
	if err != nil {
		return err
	}
	mk, err := device.OpenMasterKey(box.Sealed)
	if err != nil {
		peer.abort(ctx, sealed.AbortFailed)
		return ErrLinkUndecryptable
	}
	escrow, err := c.Escrow(ctx)
	if err != nil {
		return err
	}
	identity, err := sealed.OpenEscrowIdentity(escrow, mk)
	if err != nil {
		peer.abort(ctx, sealed.AbortFailed)
		return ErrLinkUndecryptable
	}
	if err := p.SaveKeys(&Keys{Master: mk, Identity: identity, Device: [32]byte(device.Bytes())}); err != nil {
		return err
	}
	// The old device waits for this to close the channel; should it not
	// arrive, the channel expires on its own.
	_ = peer.send(ctx, sealed.LinkMessage{Type: sealed.LinkTypeDone})
	return nil
}

// isFallback reports whether code is spelled as the numeric fallback (12
// digits, server/PROTOCOL.md §6).
func isFallback(code string) bool {
	if len(code) != 12 {
		return false
	}
	for _, r := range code {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}
