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

	"sealbox/kv"
)

// The socket speaks JSON over HTTP: one POST per operation, the arguments
// in the body, the result or {"error": ...} in the answer. Only the owner of
// the data directory can connect (the socket is mode 0600).

type userArgs struct {
	Email    string `json:"email"`
	Password string `json:"password,omitempty"`
	Disabled bool   `json:"disabled,omitempty"`
	Quota    int64  `json:"quota,omitempty"`
}

type errorBody struct {
	Error string `json:"error"`
	Code  string `json:"code,omitempty"`
}

// Handler serves ops on the admin socket.
func Handler(ops Admin) http.Handler {
	mux := http.NewServeMux()
	handle := func(path string, fn func(context.Context, userArgs) (any, error)) {
		mux.HandleFunc("POST "+path, func(w http.ResponseWriter, r *http.Request) {
			var args userArgs
			if err := json.NewDecoder(r.Body).Decode(&args); err != nil && !errors.Is(err, io.EOF) {
				writeResult(w, nil, fmt.Errorf("bad request: %w", err))
				return
			}
			res, err := fn(r.Context(), args)
			writeResult(w, res, err)
		})
	}
	handle("/users/list", func(ctx context.Context, _ userArgs) (any, error) { return ops.Users(ctx) })
	handle("/users/add", func(ctx context.Context, a userArgs) (any, error) { return ops.AddUser(ctx, a.Email, a.Password) })
	handle("/users/set-disabled", func(ctx context.Context, a userArgs) (any, error) {
		return ops.SetDisabled(ctx, a.Email, a.Disabled)
	})
	handle("/users/set-quota", func(ctx context.Context, a userArgs) (any, error) { return ops.SetQuota(ctx, a.Email, a.Quota) })
	handle("/users/reset-2fa", func(ctx context.Context, a userArgs) (any, error) { return ops.ResetSecondFactor(ctx, a.Email) })
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

func (c *Client) call(ctx context.Context, path string, args, result any) error {
	body, err := json.Marshal(args)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sealbox-admin"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	resp, err := c.http.Do(req)
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
	return out, c.call(ctx, "/users/list", userArgs{}, &out)
}

func (c *Client) AddUser(ctx context.Context, email, password string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/add", userArgs{Email: email, Password: password}, &u)
}

func (c *Client) SetDisabled(ctx context.Context, email string, disabled bool) (User, error) {
	var u User
	return u, c.call(ctx, "/users/set-disabled", userArgs{Email: email, Disabled: disabled}, &u)
}

func (c *Client) SetQuota(ctx context.Context, email string, quota int64) (User, error) {
	var u User
	return u, c.call(ctx, "/users/set-quota", userArgs{Email: email, Quota: quota}, &u)
}

func (c *Client) ResetSecondFactor(ctx context.Context, email string) (User, error) {
	var u User
	return u, c.call(ctx, "/users/reset-2fa", userArgs{Email: email}, &u)
}
