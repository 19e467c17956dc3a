package kv

import "sealbox/kv/fault"

// A Refusal is a rule of the domain that the caller's input breaks. It
// names the rule and the values the rule concerns in the domain's words,
// never a request field: the server, which knows the request, names the
// field and words the detail its client reads. It unwraps to its catalog
// error (the rule's code and the domain's message), so fault.ErrorCode and
// errors.As find its code, and a caller with no request (the operator's
// `users add`, a log line) reads the domain's message.
type Refusal struct {
	Rule Rule
	// Values are the values the rule's comment lists, in that order.
	Values []string
}

func (r *Refusal) Error() string { return r.Unwrap().Error() }

// Unwrap returns the catalog error: the rule's code and the domain's
// message.
func (r *Refusal) Unwrap() error {
	rc := ruleCodes[r.Rule]
	args := make([]any, len(r.Values))
	for i, v := range r.Values {
		args[i] = v
	}
	return fault.Errorf(rc.code, rc.message, args...)
}

// Rule names a rule of the domain that input can break.
type Rule string

// The rules, with the code each is refused with (ruleCodes).
const (
	// RuleEmail: an email address is 3 to 254 characters with exactly one
	// @, a non-empty local part and domain.
	RuleEmail Rule = "email"
	// RuleNewPassword: a password being set is 8 to 1024 characters.
	RuleNewPassword Rule = "new-password"
	// RuleOpProtocol: an op is written under its album's pinned protocol.
	// Values: the op's protocol, the album's.
	RuleOpProtocol Rule = "op-protocol"
	// RuleOpAuthor: an op's author is the caller.
	RuleOpAuthor Rule = "op-author"
	// RuleOpMetadataSent: an op carries a metadata blob exactly when its
	// manifest commits to one.
	RuleOpMetadataSent Rule = "op-metadata-sent"
	// RuleOpMetadataHash: an op's metadata blob hashes to the manifest's
	// commitment.
	RuleOpMetadataHash Rule = "op-metadata-hash"
	// RuleOpReplaceOriginal: a replace names the original blob it
	// replaces.
	RuleOpReplaceOriginal Rule = "op-replace-original"
	// RuleOpCiphertextHeld: the caller holds the op's ciphertext blob.
	RuleOpCiphertextHeld Rule = "op-ciphertext-held"
	// RuleOpOriginalHeld: the caller holds the original blob a replace
	// names.
	RuleOpOriginalHeld Rule = "op-original-held"
	// RuleShareIDFree: a share link's opaque id belongs to no other link,
	// live or revoked.
	RuleShareIDFree Rule = "share-id-free"
	// RuleShareServesHeld: the caller holds every blob a share link
	// serves. Values: the hash of the blob it does not hold.
	RuleShareServesHeld Rule = "share-serves-held"
	// RuleUpgradeNewer: an upgrade's target protocol is newer than the
	// album's. Values: the target, the album's protocol.
	RuleUpgradeNewer Rule = "upgrade-newer"
)

// ruleCodes are each rule's catalog code and the domain's message, a
// format of the rule's Values.
var ruleCodes = map[Rule]struct{ code, message string }{
	RuleEmail:             {fault.ECodeInvalid, "email must be an address of 3 to 254 characters with one @"},
	RuleNewPassword:       {fault.ECodeInvalid, "password must be 8 to 1024 characters"},
	RuleOpProtocol:        {fault.ECodeOpProtocolMismatch, "the manifest was written under protocol %s; the album is pinned to %s"},
	RuleOpAuthor:          {fault.ECodeOpForeignAuthor, "the op's author is not the caller"},
	RuleOpMetadataSent:    {fault.ECodeOpMetadataMismatch, "a metadata blob must come exactly when the manifest commits to one"},
	RuleOpMetadataHash:    {fault.ECodeOpMetadataMismatch, "the metadata blob does not hash to the manifest's commitment"},
	RuleOpReplaceOriginal: {fault.ECodeInvalid, "a replace must name the original blob it replaces"},
	RuleOpCiphertextHeld:  {fault.ECodeOpBlobMissing, "the op's ciphertext is not a blob the caller holds"},
	RuleOpOriginalHeld:    {fault.ECodeOpBlobMissing, "the replaced original is not a blob the caller holds"},
	RuleShareIDFree:       {fault.ECodeShareIDTaken, "the share link's opaque id is already registered"},
	RuleShareServesHeld:   {fault.ECodeShareBlobNotOwned, "the share link serves %s, which is not a blob the caller holds"},
	RuleUpgradeNewer:      {fault.ECodeUpgradeBadTarget, "the target protocol %s is not newer than the album's protocol %s"},
}

// refuse returns the refusal of rule for values.
func refuse(rule Rule, values ...string) *Refusal {
	return &Refusal{Rule: rule, Values: values}
}
