package server

import (
	"errors"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// refusalWording words each rule the domain refuses input by (kv.Refusal)
// for the client: the request field at fault, as a path of wire names, and
// the detail, a format of the refusal's Values. It is the one place a rule
// of kv meets a request field, except kv.RuleNewPassword, whose field is
// the request's (checkNewPassword).
var refusalWording = map[kv.Rule]struct{ field, detail string }{
	kv.RuleEmail:             {"email", "email must be an address of 3 to 254 characters with one @"},
	kv.RuleOpProtocol:        {"manifest_envelope.protocol_version", "the manifest was written under protocol %s; the album is pinned to %s"},
	kv.RuleOpAuthor:          {"manifest_envelope.created_by_user", "created_by_user is not the caller"},
	kv.RuleOpMetadataSent:    {"metadata_blob", "metadata_blob must be sent exactly when the manifest commits to metadata_blob_hash"},
	kv.RuleOpMetadataHash:    {"metadata_blob", "metadata_blob does not hash to metadata_blob_hash"},
	kv.RuleOpReplaceOriginal: {"manifest_envelope.original_blob_hash", "original_blob_hash is required on a replace"},
	kv.RuleOpCiphertextHeld:  {"manifest_envelope.ciphertext_hash", "manifest_envelope.ciphertext_hash names a blob the caller does not hold"},
	kv.RuleOpOriginalHeld:    {"manifest_envelope.original_blob_hash", "manifest_envelope.original_blob_hash names a blob the caller does not hold"},
	kv.RuleShareIDFree:       {"opaque_id", "the opaque_id is already registered"},
	kv.RuleShareServesHeld:   {"serves", "serves names %s, which is not a blob the caller holds"},
	kv.RuleUpgradeNewer:      {"to_protocol_version", "to_protocol_version %s is not newer than the album's protocol %s"},
}

// refusalProblem is r as its client reads it: its code, with the field and
// detail of refusalWording. A rule the table does not word keeps the
// domain's message and names no field.
func refusalProblem(r *kv.Refusal) *fault.Error {
	w, ok := refusalWording[r.Rule]
	if !ok {
		var domain *fault.Error
		errors.As(r, &domain)
		return domain
	}
	args := make([]any, len(r.Values))
	for i, v := range r.Values {
		args[i] = v
	}
	return fault.FieldErrorf(fault.ErrorCode(r), w.field, w.detail, args...)
}
