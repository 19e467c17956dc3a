package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"sealbox/kv"
)

// Reasons a submission fails, as the metrics and the witness state count
// them.
const (
	// ReasonConflict: the witness saw another tree than this log's at a size
	// the log holds (a fork, as after a restore from an older backup that
	// then signed other records).
	ReasonConflict = "conflict"
	// ReasonFault: the witness claims more records of this log than the log
	// holds. That proves no other history (it may as well be the witness's
	// bug or damage), so it is the witness's fault until the log reaches
	// that size and the witness shows another tree there.
	ReasonFault = "fault"
	// ReasonForbidden (403): the witness does not accept this log's key or
	// signature.
	ReasonForbidden = "forbidden"
	// ReasonNotFound (404): the witness does not know this log's origin.
	ReasonNotFound = "not_found"
	// ReasonUnreachable: no answer (down, refused, timed out).
	ReasonUnreachable = "unreachable"
	// ReasonRedirect: the witness answered with a redirect, which is not
	// followed.
	ReasonRedirect = "redirect"
	// ReasonBadAnswer: an answer the protocol does not allow, or a
	// cosignature that does not verify.
	ReasonBadAnswer = "bad_answer"
)

// faulty are the reasons that say the witness answered, but wrongly: they
// are kept in its state until it next cosigns, and it is asked again only
// after a backoff.
var faulty = map[string]bool{ReasonFault: true, ReasonRedirect: true, ReasonBadAnswer: true}

// maxAnswer bounds what is read of a witness's answer: a few signature
// lines or a tree size.
const maxAnswer = 64 << 10

// submit sends cp to wit with add-checkpoint (C2SP tlog-witness), proving
// that it extends the old size the witness was last known to hold. A 409
// names the size the witness holds: the checkpoint is sent again with a
// proof from there, so a witness that missed checkpoints, or was added
// after the log started, catches up with one proof. A returned error is the
// store's; the witness's refusals are logged and counted, and fault reports
// whether the witness answered wrongly (see faulty).
func (w *Worker) submit(ctx context.Context, wit Witness, cp *kv.LogCheckpoint, old int64) (fault bool, err error) {
	// A size beyond the log was stored by releases that believed a witness
	// naming one: ask from nothing, and the witness's 409 says what it
	// holds.
	if old > cp.Size {
		old = 0
	}
	for range 3 {
		proof, err := w.store.LogTreeProof(cp.Size, old)
		if err != nil {
			return false, err
		}
		status, answer, location, err := w.post(ctx, wit, addCheckpointBody(old, proof, cp.Note))
		if err != nil && ctx.Err() != nil {
			// The server is stopping: the witness refused nothing.
			return false, nil
		}
		if err != nil {
			return w.refused(wit, ReasonUnreachable, err.Error())
		}
		switch {
		case status == http.StatusOK:
			line, err := cosignatureLine(wit, cp.Note, answer)
			if err != nil {
				return w.refused(wit, ReasonBadAnswer, err.Error())
			}
			witnessed, err := w.store.AddCosignature(cp, wit.VerifierKey, line, w.opts.Quorum)
			if err == nil {
				w.opts.Log.Debug().Str("witness", wit.Name()).Int64("size", cp.Size).Bool("quorum", witnessed).Msg("checkpoint cosigned")
			}
			return false, err
		case status == http.StatusConflict:
			known, err := strconv.ParseInt(strings.TrimSpace(string(answer)), 10, 64)
			if err != nil || known < 0 {
				return w.refused(wit, ReasonBadAnswer, fmt.Sprintf("a 409 without a tree size: %q", answer))
			}
			if known > cp.Size {
				return w.refused(wit, ReasonFault, fmt.Sprintf(
					"the witness claims %d records of this log, which holds %d: a faulty witness (or a log rolled back, which shows as a conflict once the log holds that many records and the witness another tree)", known, cp.Size))
			}
			old = known
			if err := w.store.UpdateWitnessState(wit.VerifierKey, func(st *kv.WitnessState) { st.Size = known }); err != nil {
				return false, err
			}
		case status == http.StatusUnprocessableEntity:
			return w.refused(wit, ReasonConflict, fmt.Sprintf(
				"the witness refused the proof that this log's %d records extend the %d it accepted: it saw another tree at that size", cp.Size, old))
		case status == http.StatusForbidden:
			return w.refused(wit, ReasonForbidden, "the witness does not accept this log's key (403): add the log's verifier key to the witness")
		case status == http.StatusNotFound:
			return w.refused(wit, ReasonNotFound, "the witness does not know this log (404): add the log's origin to the witness")
		case status >= 300 && status < 400:
			return w.refused(wit, ReasonRedirect, fmt.Sprintf(
				"the witness at %s answered a redirect (%d) to %q, which is not followed: give the witness's own URL in --witness", wit.Redacted(), status, redact(location)))
		default:
			return w.refused(wit, ReasonBadAnswer, fmt.Sprintf("status %d: %q", status, bytes.TrimSpace(answer)))
		}
	}
	return w.refused(wit, ReasonBadAnswer, "the witness kept naming another tree size (409)")
}

// addCheckpointBody is the add-checkpoint request: "old <size>", one line
// per proof hash (base64), a blank line, and the signed checkpoint.
func addCheckpointBody(old int64, proof tlog.TreeProof, signedNote []byte) []byte {
	body := fmt.Appendf(nil, "old %d\n", old)
	for _, h := range proof {
		body = fmt.Appendf(body, "%s\n", h)
	}
	body = append(body, '\n')
	return append(body, signedNote...)
}

// post sends body to wit's add-checkpoint and reads its answer, and the
// Location of a redirect. Its errors name the witness's URL without its
// user information (net/http's would keep the user name).
func (w *Worker) post(ctx context.Context, wit Witness, body []byte) (status int, answer []byte, location string, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wit.URL+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return 0, nil, "", fmt.Errorf("POST %s/add-checkpoint: %w", wit.Redacted(), unwrapURL(err))
	}
	resp, err := w.opts.Client.Do(req)
	if err != nil {
		return 0, nil, "", fmt.Errorf("POST %s/add-checkpoint: %w", wit.Redacted(), unwrapURL(err))
	}
	defer resp.Body.Close()
	answer, err = io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, "", fmt.Errorf("POST %s/add-checkpoint: reading the answer: %w", wit.Redacted(), err)
	}
	return resp.StatusCode, answer, resp.Header.Get("Location"), nil
}

// unwrapURL is err without the *url.Error around it, which names the URL.
func unwrapURL(err error) error {
	if ue := (*url.Error)(nil); errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// refused counts a witness's refusal in the witness's state, then logs it. A
// conflict, or a wrong answer (see faulty), is also kept there until the
// witness next cosigns, for /readyz; a conflict ends the fault before it,
// being an answer the protocol allows. It returns whether the answer was
// wrong, and the store's error only: a refusal is retried next round, or
// after a backoff when the answer was wrong.
func (w *Worker) refused(wit Witness, reason, why string) (fault bool, err error) {
	// Stored first, so whoever reads the log line finds the refusal in the
	// metrics and /readyz.
	err = w.store.UpdateWitnessState(wit.VerifierKey, func(st *kv.WitnessState) {
		if st.Refusals == nil {
			st.Refusals = map[string]uint64{}
		}
		st.Refusals[reason]++
		switch {
		case reason == ReasonConflict:
			st.Conflict, st.Fault = why, ""
		case faulty[reason]:
			st.Fault = why
		}
	})
	ev := w.opts.Log.Warn()
	if reason == ReasonConflict {
		ev = w.opts.Log.Error()
	}
	ev.Str("witness", wit.Name()).Str("url", wit.Redacted()).Str("reason", reason).Msg("witness refused the checkpoint: " + why)
	return faulty[reason], err
}
