package kv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// pgEngine is the Engine on PostgreSQL, for several sealbox nodes sharing
// one database. Each bucket is one table of bytea keys and values (bytea,
// never text: text compares by collation, and the store's keys are ordered
// by their bytes). An update runs SERIALIZABLE, so every compare-and-set
// the domain code makes holds across nodes as it does under bbolt's single
// writer; a transaction that loses a conflict (40001, 40P01) is rolled back
// and its function run again after a jittered pause. A view runs
// REPEATABLE READ READ ONLY: one snapshot, no predicate locks. Writes are
// kept in the transaction until commit and sent then in one pipelined
// batch, with the COMMIT: an update costs its reads plus one round trip.
// This file is the only one of kv that imports pgx.
type pgEngine struct {
	pool *pgxpool.Pool
	// retries counts the transactions rerun after losing a conflict.
	retries atomic.Uint64
}

// OpenPostgresEngine connects to the PostgreSQL database url names
// (postgres://USER@HOST:PORT/DB?sslmode=...; a search_path parameter picks
// the schema the tables live in).
func OpenPostgresEngine(ctx context.Context, url string) (Engine, error) {
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("store url: %w", err)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return &pgEngine{pool: pool}, nil
}

// tableName is the table that holds a bucket. Bucket names are sealbox's
// own constants ([a-z_]); the prefix keeps them apart from anything else in
// the schema.
func tableName(bucket []byte) string { return pgx.Identifier{"kv_" + string(bucket)}.Sanitize() }

func (e *pgEngine) Buckets() (map[string]bool, error) {
	rows, err := e.pool.Query(context.Background(),
		`SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_name LIKE 'kv\_%'`)
	if err != nil {
		return nil, err
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	out := map[string]bool{}
	for _, n := range names {
		out[strings.TrimPrefix(n, "kv_")] = true
	}
	return out, err
}

func (e *pgEngine) CreateBuckets(names [][]byte) error {
	create := func() error {
		var b pgx.Batch
		for _, name := range names {
			b.Queue(`CREATE TABLE IF NOT EXISTS ` + tableName(name) + ` (k bytea PRIMARY KEY, v bytea NOT NULL)`)
		}
		return e.pool.SendBatch(context.Background(), &b).Close()
	}
	// Two nodes starting at once may both create a table: the loser's
	// CREATE fails on the catalog's unique index, and the table exists, so
	// a second run finds it.
	err := create()
	if code := pgErrCode(err); code == "23505" || code == "42P07" {
		err = create()
	}
	return err
}

func (e *pgEngine) Close() error { e.pool.Close(); return nil }

func (e *pgEngine) Update(fn func(Tx) error) error { return e.run(pgx.Serializable, pgx.ReadWrite, fn) }

// Batch is Update: a database server commits concurrent transactions side
// by side, so there is no commit to share.
func (e *pgEngine) Batch(fn func(Tx) error) error { return e.Update(fn) }

func (e *pgEngine) View(fn func(Tx) error) error { return e.run(pgx.RepeatableRead, pgx.ReadOnly, fn) }

// maxAttempts bounds the reruns of one transaction that keeps losing
// conflicts; the last error is returned.
const maxAttempts = 50

func (e *pgEngine) run(iso pgx.TxIsoLevel, mode pgx.TxAccessMode, fn func(Tx) error) error {
	ctx := context.Background()
	var err error
	for attempt := range maxAttempts {
		if attempt > 0 {
			// Jittered, growing pause, so the transactions that conflicted
			// do not meet again at once.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6))))
		}
		err = e.attempt(ctx, iso, mode, fn)
		if code := pgErrCode(err); code != "40001" && code != "40P01" {
			return err
		}
		e.retries.Add(1)
	}
	return err
}

// Stats reports the pool's connections and the conflicts retried.
func (e *pgEngine) Stats() EngineStats {
	st := e.pool.Stat()
	return EngineStats{
		AcquiredConns: st.AcquiredConns(), IdleConns: st.IdleConns(),
		TotalConns: st.TotalConns(), MaxConns: st.MaxConns(),
		TxRetries: e.retries.Load(),
	}
}

func (e *pgEngine) attempt(ctx context.Context, iso pgx.TxIsoLevel, mode pgx.TxAccessMode, fn func(Tx) error) error {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{IsoLevel: iso, AccessMode: mode})
	if err != nil {
		return err
	}
	t := &pgTx{ctx: ctx, tx: tx, writes: map[string]*pgWrites{}}
	if err := fn(t); err != nil {
		tx.Rollback(ctx)
		return err
	}
	if err := t.flush(); err != nil {
		tx.Rollback(ctx)
		return err
	}
	return tx.Commit(ctx)
}

func pgErrCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// pgTx keeps a transaction's writes, per bucket, until commit; reads see
// them (a Get or Scan after a Put in the same transaction answers the Put).
type pgTx struct {
	ctx    context.Context
	tx     pgx.Tx
	writes map[string]*pgWrites
}

// pgWrites is one bucket's pending writes: key to value, nil for a delete.
type pgWrites struct {
	table string
	set   map[string][]byte
}

func (t *pgTx) Bucket(name []byte) Bucket {
	w := t.writes[string(name)]
	if w == nil {
		w = &pgWrites{table: tableName(name), set: map[string][]byte{}}
		t.writes[string(name)] = w
	}
	return pgBucket{t: t, w: w}
}

// flush sends every pending write in one pipelined batch.
func (t *pgTx) flush() error {
	var b pgx.Batch
	for _, w := range t.writes {
		for k, v := range w.set {
			if v == nil {
				b.Queue(`DELETE FROM `+w.table+` WHERE k = $1`, []byte(k))
			} else {
				b.Queue(`INSERT INTO `+w.table+` (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, []byte(k), v)
			}
		}
	}
	if b.Len() == 0 {
		return nil
	}
	return t.tx.SendBatch(t.ctx, &b).Close()
}

type pgBucket struct {
	t *pgTx
	w *pgWrites
}

func (b pgBucket) Get(key []byte) ([]byte, error) {
	if v, ok := b.w.set[string(key)]; ok {
		return v, nil
	}
	var v []byte
	err := b.t.tx.QueryRow(b.t.ctx, `SELECT v FROM `+b.w.table+` WHERE k = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if v == nil && err == nil {
		v = []byte{}
	}
	return v, err
}

func (b pgBucket) Put(key, value []byte) error {
	if value == nil {
		value = []byte{}
	}
	b.w.set[string(key)] = bytes.Clone(value)
	return nil
}

func (b pgBucket) Delete(key []byte) error {
	b.w.set[string(key)] = nil
	return nil
}

// Scan merges the table's rows in r with the transaction's pending writes
// in r. Pending deletes can hide rows, so the query asks for that many more
// than the limit.
func (b pgBucket) Scan(r Range, fn func(k, v []byte) error) error {
	if err := checkRange(r); err != nil {
		return err
	}
	inRange := func(k []byte) bool {
		return (r.From == nil || bytes.Compare(k, r.From) >= 0) && (r.To == nil || bytes.Compare(k, r.To) < 0)
	}
	var pending []pgPair
	deletes := 0
	for k, v := range b.w.set {
		if inRange([]byte(k)) {
			pending = append(pending, pgPair{[]byte(k), v})
			if v == nil {
				deletes++
			}
		}
	}
	order := func(x, y pgPair) int {
		if r.Reverse {
			return bytes.Compare(y.k, x.k)
		}
		return bytes.Compare(x.k, y.k)
	}
	slices.SortFunc(pending, order)
	stored, err := b.query(r, deletes)
	if err != nil {
		return err
	}
	n := 0
	for len(pending) > 0 || len(stored) > 0 {
		var next pgPair
		switch {
		case len(stored) == 0 || len(pending) > 0 && order(pending[0], stored[0]) <= 0:
			if len(stored) > 0 && bytes.Equal(pending[0].k, stored[0].k) {
				stored = stored[1:]
			}
			next, pending = pending[0], pending[1:]
		default:
			next, stored = stored[0], stored[1:]
		}
		if next.v == nil {
			continue
		}
		if r.Limit > 0 && n == r.Limit {
			return nil
		}
		n++
		if err := fn(next.k, next.v); err != nil {
			if errors.Is(err, ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}

type pgPair struct{ k, v []byte }

// query reads the table's rows in r, extra more than r.Limit.
func (b pgBucket) query(r Range, extra int) ([]pgPair, error) {
	var where []string
	var args []any
	if r.From != nil {
		args = append(args, r.From)
		where = append(where, fmt.Sprintf("k >= $%d", len(args)))
	}
	if r.To != nil {
		args = append(args, r.To)
		where = append(where, fmt.Sprintf("k < $%d", len(args)))
	}
	q := `SELECT k, v FROM ` + b.w.table
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	if r.Reverse {
		q += ` ORDER BY k DESC`
	} else {
		q += ` ORDER BY k`
	}
	if r.Limit > 0 {
		q += fmt.Sprintf(` LIMIT %d`, r.Limit+extra)
	}
	rows, err := b.t.tx.Query(b.t.ctx, q, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (pgPair, error) {
		var p pgPair
		err := row.Scan(&p.k, &p.v)
		if p.v == nil {
			p.v = []byte{}
		}
		return p, err
	})
}
