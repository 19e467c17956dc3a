package witness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"

	"sealbox/kv"
)

// Reasons a submission fails, as the metrics and the witness state count
// them.
const (
	// ReasonConflict: the witness saw another tree than this log's at a size
	// it accepted, or more records than the log holds (a fork or a
	// rollback, as after a restore from an older backup).
	ReasonConflict = "conflict"
	// ReasonForbidden (403): the witness does not accept this log's key or
	// signature.
	ReasonForbidden = "forbidden"
	// ReasonNotFound (404): the witness does not know this log's origin.
	ReasonNotFound = "not_found"
	// ReasonUnreachable: no answer (down, refused, timed out).
	ReasonUnreachable = "unreachable"
	// ReasonBadAnswer: an answer the protocol does not allow, or a
	// cosignature that does not verify.
	ReasonBadAnswer = "bad_answer"
)

// maxAnswer bounds what is read of a witness's answer: a few signature
// lines or a tree size.
const maxAnswer = 64 << 10

// submit sends cp to wit with add-checkpoint (C2SP tlog-witness), proving
// that it extends the old size the witness was last known to hold. A 409
// names the size the witness holds: the checkpoint is sent again with a
// proof from there, so a witness that missed checkpoints, or was added
// after the log started, catches up with one proof. A returned error is the
// store's; the witness's refusals are logged and counted.
func (w *Worker) submit(ctx context.Context, wit Witness, cp *kv.LogCheckpoint, old int64) error {
	for range 3 {
		if old > cp.Size {
			return w.refused(wit, ReasonConflict, fmt.Sprintf(
				"the witness has seen %d records of this log, which now holds %d: the log was rolled back (restored from an older backup?) and its new records are another history", old, cp.Size))
		}
		proof, err := w.store.LogTreeProof(cp.Size, old)
		if err != nil {
			return err
		}
		status, answer, err := w.post(ctx, wit, addCheckpointBody(old, proof, cp.Note))
		if err != nil && ctx.Err() != nil {
			// The server is stopping: the witness refused nothing.
			return nil
		}
		if err != nil {
			return w.refused(wit, ReasonUnreachable, err.Error())
		}
		switch status {
		case http.StatusOK:
			line, err := cosignatureLine(wit, cp.Note, answer)
			if err != nil {
				return w.refused(wit, ReasonBadAnswer, err.Error())
			}
			witnessed, err := w.store.AddCosignature(cp, wit.VerifierKey, line, w.opts.Quorum)
			if err == nil {
				w.opts.Log.Debug().Str("witness", wit.Name()).Int64("size", cp.Size).Bool("quorum", witnessed).Msg("checkpoint cosigned")
			}
			return err
		case http.StatusConflict:
			known, err := strconv.ParseInt(strings.TrimSpace(string(answer)), 10, 64)
			if err != nil || known < 0 {
				return w.refused(wit, ReasonBadAnswer, fmt.Sprintf("a 409 without a tree size: %q", answer))
			}
			old = known
			if err := w.store.UpdateWitnessState(wit.VerifierKey, func(st *kv.WitnessState) { st.Size = known }); err != nil {
				return err
			}
		case http.StatusUnprocessableEntity:
			return w.refused(wit, ReasonConflict, fmt.Sprintf(
				"the witness refused the proof that this log's %d records extend the %d it accepted: it saw another tree at that size", cp.Size, old))
		case http.StatusForbidden:
			return w.refused(wit, ReasonForbidden, "the witness does not accept this log's key (403): add the log's verifier key to the witness")
		case http.StatusNotFound:
			return w.refused(wit, ReasonNotFound, "the witness does not know this log (404): add the log's origin to the witness")
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

// post sends body to wit's add-checkpoint and reads its answer.
func (w *Worker) post(ctx context.Context, wit Witness, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, wit.URL+"/add-checkpoint", bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	resp, err := w.opts.Client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return 0, nil, err
	}
	return resp.StatusCode, answer, nil
}

// refused counts a witness's refusal in the witness's state, then logs it; a
// conflict is also kept there until the witness next cosigns, for /readyz.
// It returns the store's error only: a refusal is retried next round.
func (w *Worker) refused(wit Witness, reason, why string) error {
	// Stored first, so whoever reads the log line finds the refusal in the
	// metrics and /readyz.
	err := w.store.UpdateWitnessState(wit.VerifierKey, func(st *kv.WitnessState) {
		if st.Refusals == nil {
			st.Refusals = map[string]uint64{}
		}
		st.Refusals[reason]++
		if reason == ReasonConflict {
			st.Conflict = why
		}
	})
	ev := w.opts.Log.Warn()
	if reason == ReasonConflict {
		ev = w.opts.Log.Error()
	}
	ev.Str("witness", wit.Name()).Str("url", wit.URL).Str("reason", reason).Msg("witness refused the checkpoint: " + why)
	return err
}
