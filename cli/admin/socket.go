package admin

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"sealbox/kv/fault"
)

// The socket speaks JSON over HTTP: one POST per operation, the arguments
// in the body, and an answer whose headers (200) are sent before the
// operation starts, followed by {"result": ...} or {"error": ...} once it
// ends. Sending the headers at once lets the client bound the wait for them
// (a stopped server never sends them) without cutting a check or gc that
// runs for hours. Only the server's user and root can connect: the socket
// is mode 0600, and the server checks every peer's uid (Listen).

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
	Keep     int           `json:"keep,omitempty"`
	// Invite and ID are `users invite`'s options and `users uninvite`'s id.
	Invite *InviteOptions `json:"invite,omitempty"`
	ID     string         `json:"id,omitempty"`
}

// backupEvent is one line of the backup stream: progress, then the report
// or an error.
type backupEvent struct {
	Progress *Progress    `json:"progress,omitempty"`
	Report   BackupReport `json:"report"`
	Error    string       `json:"error,omitempty"`
	Done     bool         `json:"done,omitempty"`
}

// answer is the body of every operation's answer but the backup's.
type answer struct {
	Result json.RawMessage `json:"result,omitempty"`
	Error  string          `json:"error,omitempty"`
	Code   string          `json:"code,omitempty"`
}

// Handler serves ops on the admin socket.
func Handler(ops Admin) http.Handler {
	mux := http.NewServeMux()
	// Dial's proof that the server answers.
	mux.HandleFunc("GET /ping", func(http.ResponseWriter, *http.Request) {})
	handle := func(path string, fn func(context.Context, args) (any, error)) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			// The arguments are read first: net/http closes the request
			// body once the answer's headers are out.
			var args args
			err := json.NewDecoder(r.Body).Decode(&args)
			w.Header().Set("Content-Type", "application/json")
			sendHeaders(w)
			if err != nil && !errors.Is(err, io.EOF) {
				writeAnswer(w, nil, fmt.Errorf("bad request: %w", err))
				return
			}
			res, err := fn(r.Context(), args)
			writeAnswer(w, res, err)
		})
	}
	handle("/users/list", func(ctx context.Context, _ args) (any, error) { return ops.Users(ctx) })
	handle("/users/add", func(ctx context.Context, a args) (any, error) { return ops.AddUser(ctx, a.Email, a.Password) })
	handle("/users/set-disabled", func(ctx context.Context, a args) (any, error) {
		return ops.SetDisabled(ctx, a.Email, a.Disabled)
	})
	handle("/users/set-quota", func(ctx context.Context, a args) (any, error) { return ops.SetQuota(ctx, a.Email, a.Quota) })
	handle("/users/reset-2fa", func(ctx context.Context, a args) (any, error) { return ops.ResetSecondFactor(ctx, a.Email) })
	handle("/users/reset-directory", func(ctx context.Context, a args) (any, error) { return ops.ResetDirectory(ctx, a.Email) })
	handle("/users/set-password", func(ctx context.Context, a args) (any, error) {
		return ops.SetPassword(ctx, a.Email, a.Password)
	})
	handle("/users/delete", func(ctx context.Context, a args) (any, error) { return ops.DeleteUser(ctx, a.Email) })
	handle("/users/invite", func(ctx context.Context, a args) (any, error) {
		if a.Invite == nil {
			return nil, fmt.Errorf("bad request: no invitation options")
		}
		return ops.Invite(ctx, *a.Invite)
	})
	handle("/users/invites", func(ctx context.Context, _ args) (any, error) { return ops.Invites(ctx) })
	handle("/users/uninvite", func(ctx context.Context, a args) (any, error) { return struct{}{}, ops.Uninvite(ctx, a.ID) })
	handle("/check", func(ctx context.Context, a args) (any, error) { return ops.Check(ctx, a.Deep) })
	handle("/gc", func(ctx context.Context, a args) (any, error) { return ops.GC(ctx, a.DryRun, a.Grace) })
	// A backup streams its progress as JSON lines, then the report.
	// Its headers go out at once too: the snapshot is written before the
	// first progress line, and on a large store that takes a while.
	mux.HandleFunc("POST /backup", func(w http.ResponseWriter, r *http.Request) {
		var a args
		err := json.NewDecoder(r.Body).Decode(&a)
		w.Header().Set("Content-Type", "application/x-ndjson")
		sendHeaders(w)
		enc := json.NewEncoder(w)
		if err != nil {
			enc.Encode(backupEvent{Done: true, Error: fmt.Sprintf("bad request: %v", err)})
			return
		}
		rep, err := ops.Backup(r.Context(), a.Dest, BackupOptions{Keep: a.Keep}, func(p Progress) {
			enc.Encode(backupEvent{Progress: &p})
			flush(w)
		})
		last := backupEvent{Report: rep, Done: true}
		if err != nil {
			last.Error = err.Error()
		}
		enc.Encode(last)
	})
	return mux
}

// sendHeaders sends a 200 answer's headers before the operation runs, so
// the client's bound on the wait for them never cuts a long operation.
func sendHeaders(w http.ResponseWriter) {
	w.WriteHeader(http.StatusOK)
	flush(w)
}

func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

// writeAnswer writes the operation's result or its error; a fault.Error keeps
// its code, so the client returns the same error Ops would have.
func writeAnswer(w http.ResponseWriter, res any, err error) {
	var a answer
	if err == nil {
		a.Result, err = json.Marshal(res)
	}
	if err != nil {
		a.Error = err.Error()
		var ke *fault.Error
		if errors.As(err, &ke) {
			a.Error, a.Code = ke.Message, ke.Code
		}
	}
	json.NewEncoder(w).Encode(a)
}

// ListenOptions say who may use the admin socket, and who is told of the
// others.
type ListenOptions struct {
	// Allowed says whether a peer running as uid may use the socket; nil
	// allows this process's user and root.
	Allowed func(uid uint32) bool
	// Refused, when set, is told of every connection refused: its peer's
	// uid, or why that could not be read (err).
	Refused func(uid uint32, err error)
}

// Listen opens the admin socket at path, and accepts on it only
// connections whose peer runs as a user opts allow (the kernel's record of
// the peer, SO_PEERCRED); the others are closed at once and reported.
//
// The socket is bound in a new private directory (mode 0700 whatever the
// umask: it can only remove bits), made mode 0600 there, and only then
// renamed to path, replacing any stale socket a crashed server left. So it
// is never reachable with the permissions the umask gave it, and the
// process-wide umask is never changed under other goroutines.
func Listen(path string, opts ListenOptions) (net.Listener, error) {
	if opts.Allowed == nil {
		opts.Allowed = serverOrRoot
	}
	dir, err := os.MkdirTemp(filepath.Dir(path), ".admin-")
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	defer os.Remove(dir)
	private := filepath.Join(dir, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: private, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	// The name it was bound to is gone once renamed; the server's stop
	// removes path.
	ln.SetUnlinkOnClose(false)
	err = os.Chmod(private, 0o600)
	if err == nil {
		err = os.Rename(private, path)
	}
	if err != nil {
		ln.Close()
		os.Remove(private)
		return nil, fmt.Errorf("admin socket: %w", err)
	}
	return &peerCheckedListener{UnixListener: ln, opts: opts}, nil
}

// serverOrRoot allows this process's own user and root.
func serverOrRoot(uid uint32) bool {
	return uid == 0 || int64(uid) == int64(os.Geteuid())
}

// peerCheckedListener hands the server only the connections whose peer
// opts allow.
type peerCheckedListener struct {
	*net.UnixListener
	opts ListenOptions
}

func (l *peerCheckedListener) Accept() (net.Conn, error) {
	for {
		c, err := l.AcceptUnix()
		if err != nil {
			return nil, err
		}
		uid, err := peerUID(c)
		if err == nil && l.opts.Allowed(uid) {
			return c, nil
		}
		// Reported before the close, so a refused client that sees its
		// connection end can rely on the refusal being on record.
		if l.opts.Refused != nil {
			l.opts.Refused(uid, err)
		}
		c.Close()
	}
}

// Client calls a running server's admin socket.
type Client struct {
	http *http.Client
}

var _ Admin = (*Client)(nil)

// ErrNoServer reports that nothing listens on the admin socket: there is no
// socket file, or only a stale one left by a crash. Only then may the caller
// open the store directly; any other Dial error means a process may hold
// it.
var ErrNoServer = errors.New("no server listens on the admin socket")

// Dial connects to the admin socket at path and checks that the server
// answers within answerTimeout, so that a stopped (SIGSTOP) or stuck server,
// whose socket the kernel still accepts connections on, fails here instead
// of hanging the caller. Every later call fails too if the answer's headers
// take longer than answerTimeout; the handlers send them at once, so only
// a server that stopped answering hits that bound.
func Dial(path string, answerTimeout time.Duration) (*Client, error) {
	conn, err := net.DialTimeout("unix", path, answerTimeout)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("%w: %v", ErrNoServer, err)
	}
	if err != nil {
		return nil, fmt.Errorf("admin socket %s: %w", path, err)
	}
	err = ping(conn, answerTimeout)
	conn.Close()
	if err != nil {
		return nil, fmt.Errorf("a process listens on the admin socket %s but did not answer within %s (is the server stopped or stuck?): %w", path, answerTimeout, err)
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			d := net.Dialer{Timeout: answerTimeout}
			return d.DialContext(ctx, "unix", path)
		},
		ResponseHeaderTimeout: answerTimeout,
	}
	return &Client{http: &http.Client{Transport: tr}}, nil
}

// ping sends GET /ping on conn and reads the answer, all before the
// deadline.
func ping(conn net.Conn, timeout time.Duration) error {
	if err := conn.SetDeadline(time.Now().Add(timeout)); err != nil {
		return err
	}
	req, err := http.NewRequest(http.MethodGet, "http://sealbox-admin/ping", nil)
	if err != nil {
		return err
	}
	if err := req.Write(conn); err != nil {
		return err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the ping was answered %s", resp.Status)
	}
	return nil
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
		return fmt.Errorf("admin socket answered %s", resp.Status)
	}
	var ans answer
	if err := json.NewDecoder(resp.Body).Decode(&ans); err != nil {
		return fmt.Errorf("the server's answer broke off: %w", err)
	}
	switch {
	case ans.Code != "":
		return &fault.Error{Code: ans.Code, Message: ans.Error}
	case ans.Error != "":
		return errors.New(ans.Error)
	}
	return json.Unmarshal(ans.Result, result)
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

func (c *Client) SetPassword(ctx context.Context, email, password string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/set-password", args{Email: email, Password: password}, &u)
}

func (c *Client) DeleteUser(ctx context.Context, email string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/delete", args{Email: email}, &u)
}

func (c *Client) ResetSecondFactor(ctx context.Context, email string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/reset-2fa", args{Email: email}, &u)
}

func (c *Client) ResetDirectory(ctx context.Context, email string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/reset-directory", args{Email: email}, &u)
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
func (c *Client) Backup(ctx context.Context, dest string, opts BackupOptions, progress func(Progress)) (BackupReport, error) {
	resp, err := c.post(ctx, "/backup", args{Dest: dest, Keep: opts.Keep})
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
