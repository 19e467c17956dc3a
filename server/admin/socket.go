package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"

	"sealbox/kv"
)

// The socket speaks JSON over HTTP: one POST per operation, the arguments
// in the body, the result or {"error": ...} in the answer. Only the owner of
// the data directory can connect (the socket is mode 0600).

// args carries every operation's arguments; each uses its own fields.
type args struct {
	Email    string        `json:"email,omitempty"`
	Password string        `json:"password,omitempty"`
	Disabled bool          `json:"disabled,omitempty"`
	Quota    int64         `json:"quota,omitempty"`
	Dest     string        `json:"dest,omitempty"`
	Deep     bool          `json:"deep,omitempty"`
	DryRun   bool          `json:"dry_run,omitempty"`
	Grace    time.Duration `json:"grace,omitempty"`
}

// backupEvent is one line of the backup stream: progress, then the report
// or an error.
type backupEvent struct {
	Progress *Progress    `json:"progress,omitempty"`
	Report   BackupReport `json:"report"`
	Error    string       `json:"error,omitempty"`
	Done     bool         `json:"done,omitempty"`
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// Handler serves ops on the admin socket.
func Handler(ops Admin) http.Handler {
	mux := http.NewServeMux()
	handle := func(path string, fn func(context.Context, args) (any, error)) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			var args args
			if err := json.NewDecoder(r.Body).Decode(&args); err != nil && !errors.Is(err, io.EOF) {
				writeResult(w, nil, fmt.Errorf("bad request: %w", err))
				return
			}
			res, err := fn(r.Context(), args)
			writeResult(w, res, err)
		})
	}
	handle("/users/list", func(ctx context.Context, _ args) (any, error) { return ops.Users(ctx) })
	handle("/users/add", func(ctx context.Context, a args) (any, error) { return ops.AddUser(ctx, a.Email, a.Password) })
	handle("/users/set-disabled", func(ctx context.Context, a args) (any, error) {
		return ops.SetDisabled(ctx, a.Email, a.Disabled)
	})
	handle("/users/set-quota", func(ctx context.Context, a args) (any, error) { return ops.SetQuota(ctx, a.Email, a.Quota) })
	handle("/users/reset-2fa", func(ctx context.Context, a args) (any, error) { return ops.ResetSecondFactor(ctx, a.Email) })
	handle("/check", func(ctx context.Context, a args) (any, error) { return ops.Check(ctx, a.Deep) })
	handle("/gc", func(ctx context.Context, a args) (any, error) { return ops.GC(ctx, a.DryRun, a.Grace) })
	// A backup streams its progress as JSON lines, then the report.
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
		var a args
		if err := json.NewDecoder(r.Body).Decode(&a); err != nil {
			writeResult(w, nil, fmt.Errorf("bad request: %w", err))
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson")
		enc := json.NewEncoder(w)
		flush := func() {
			if f, ok := w.(http.Flusher); ok {
				f.Flush()
			}
		}
		rep, err := ops.Backup(r.Context(), a.Dest, func(p Progress) {
			enc.Encode(backupEvent{Progress: &p})
			flush()
		})
		last := backupEvent{Report: rep, Done: true}
		if err != nil {
			last.Error = err.Error()
		}
		enc.Encode(last)
	})
	return mux
}

func writeResult(w http.ResponseWriter, res any, err error) {
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		status := http.StatusInternalServerError
		body := errorBody{Error: err.Error()}
		var ke *kv.Error
		if errors.As(err, &ke) {
			status, body = http.StatusBadRequest, errorBody{Error: ke.Message, Code: ke.Code}
		}
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(body)
		return
	}
	json.NewEncoder(w).Encode(res)
}

// Listen opens the admin socket at path, readable and writable by the
// owner only. A stale socket file from a crashed server is replaced.
func Listen(path string) (net.Listener, error) {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return ln, nil
}

// Client calls a running server's admin socket.
type Client struct {
	http *http.Client
}

var _ Admin = (*Client)(nil)

// Dial connects to the admin socket at path; it fails at once when no
// server listens there.
func Dial(path string) (*Client, error) {
	conn, err := net.Dial("unix", path)
	if err != nil {
		return nil, err
	}
	conn.Close()
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", path)
	}}
	return &Client{http: &http.Client{Transport: tr}}, nil
}

func (c *Client) post(ctx context.Context, path string, a args) (*http.Response, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sealbox-admin"+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	return c.http.Do(req)
}

func (c *Client) call(ctx context.Context, path string, a args, result any) error {
	resp, err := c.post(ctx, path, a)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var eb errorBody
		if err := json.NewDecoder(resp.Body).Decode(&eb); err != nil {
			return fmt.Errorf("admin socket answered %s", resp.Status)
		}
		if eb.Code != "" {
			return &kv.Error{Code: eb.Code, Message: eb.Error}
		}
		return errors.New(eb.Error)
	}
	return json.NewDecoder(resp.Body).Decode(result)
}

func (c *Client) Users(ctx context.Context) ([]User, error) {
	var out []User
	return out, c.call(ctx, "/users/list", args{}, &out)
}

func (c *Client) AddUser(ctx context.Context, email, password string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/add", args{Email: email, Password: password}, &u)
}

func (c *Client) SetDisabled(ctx context.Context, email string, disabled bool) (User, error) {
	var u User
	return u, c.call(ctx, "/users/set-disabled", args{Email: email, Disabled: disabled}, &u)
}

func (c *Client) SetQuota(ctx context.Context, email string, quota int64) (User, error) {
	var u User
	return u, c.call(ctx, "/users/set-quota", args{Email: email, Quota: quota}, &u)
}

func (c *Client) ResetSecondFactor(ctx context.Context, email string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/reset-2fa", args{Email: email}, &u)
}

func (c *Client) Check(ctx context.Context, deep bool) (CheckReport, error) {
	var rep CheckReport
	return rep, c.call(ctx, "/check", args{Deep: deep}, &rep)
}

func (c *Client) GC(ctx context.Context, dryRun bool, grace time.Duration) (GCReport, error) {
	var rep GCReport
	return rep, c.call(ctx, "/gc", args{DryRun: dryRun, Grace: grace}, &rep)
}

// Backup runs the backup in the server process (which holds the files) and
// relays its progress.
func (c *Client) Backup(ctx context.Context, dest string, progress func(Progress)) (BackupReport, error) {
	resp, err := c.post(ctx, "/backup", args{Dest: dest})
	if err != nil {
		return BackupReport{}, err
	}
	defer resp.Body.Close()
	dec := json.NewDecoder(resp.Body)
	for {
		var ev backupEvent
		if err := dec.Decode(&ev); err != nil {
			return BackupReport{}, fmt.Errorf("the server's backup stream broke off: %w", err)
		}
		if ev.Progress != nil && progress != nil {
			progress(*ev.Progress)
		}
		if ev.Done {
			if ev.Error != "" {
				return ev.Report, errors.New(ev.Error)
			}
			return ev.Report, nil
		}
	}
}
