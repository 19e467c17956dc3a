// Package postgres is the engine of sealbox's store on PostgreSQL, for
// several nodes sharing one database; it alone imports pgx. It implements
// kv/engine's Engine with engine.StatsReporter and engine.StatementReader,
// and is not engine.Exclusive: other processes write the same tables.
package postgres

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"sealbox/kv/engine"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Engine is the engine.Engine on PostgreSQL. Each bucket is one table of bytea keys and values (bytea,
// never text: text compares by collation, and the store's keys are ordered
// by their bytes). An update runs SERIALIZABLE, so every compare-and-set
// the domain code makes holds across nodes as it does under bbolt's single
// writer; a transaction that loses a conflict (40001, 40P01) is rolled back
// and its function run again after a jittered pause. A view runs
// REPEATABLE READ READ ONLY: one snapshot, no predicate locks. The BEGIN
// goes with the first read, and writes are kept in the transaction until
// commit and sent then in one pipelined batch with the COMMIT: an update
// costs its reads plus one round trip, a view its reads (its COMMIT goes
// after it has returned), and a ReadOne or a Follow one round trip.
type Engine struct {
	pool  *pgxpool.Pool
	batch batcher
	// retries counts the transactions rerun after losing a conflict.
	retries atomic.Uint64
	// roundTrips and reads count the exchanges with the server (see
	// engine.Stats).
	roundTrips, reads atomic.Uint64
	// conflicts counts the lost conflicts by where they were found
	// (engine.Stats.Conflicts).
	conflictsMu sync.Mutex
	conflicts   map[string]uint64
}

// The batching of concurrent writers (Batch): the tuned values bbolt runs
// with (kv/bolt's Options.MaxBatchSize and MaxBatchDelay defaults).
const (
	pgMaxBatchSize  = 64
	pgMaxBatchDelay = 2 * time.Millisecond
)

// Open connects to the PostgreSQL database url names
// (postgres://USER@HOST:PORT/DB?sslmode=...; a search_path parameter picks
// the schema the tables live in).
func Open(ctx context.Context, url string) (*Engine, error) {
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
		// A refused password is most often one not given at all: it is
		// never read from the URL's place on a command line.
		if pgErrCode(err) == "28P01" {
			return nil, fmt.Errorf("connect to PostgreSQL: %w: give the role's password in PGPASSWORD, or in the file PGPASSFILE names (~/.pgpass by default), not in the URL", err)
		}
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	e := &Engine{pool: pool}
	e.batch = batcher{update: e.Update, maxSize: pgMaxBatchSize, maxDelay: pgMaxBatchDelay}
	return e, nil
}

// tableName is the table that holds a bucket. Bucket names are sealbox's
// own constants ([a-z_]); the prefix keeps them apart from anything else in
// the schema.
func tableName(bucket []byte) string { return pgx.Identifier{"kv_" + string(bucket)}.Sanitize() }

func (e *Engine) Buckets() (map[string]bool, error) {
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

func (e *Engine) CreateBuckets(names [][]byte) error {
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

func (e *Engine) Close() error { e.pool.Close(); return nil }

func (e *Engine) Update(fn func(engine.Tx) error) error { return e.run(beginUpdate, fn) }

// Batch runs fn in one update with the concurrent callers' functions
// (batcher): writers of one album, who would conflict, apply in turn in one
// transaction instead of losing and retrying, and share its commit.
func (e *Engine) Batch(fn func(engine.Tx) error) error { return e.batch.Batch(fn) }

// BatchReading is Batch for a function that will read keys, read with the
// keys of the batch's other calls in one round trip (engine.BatchReader).
func (e *Engine) BatchReading(keys []engine.Key, fn func(engine.Tx) error) error {
	return e.batch.BatchReading(keys, fn)
}

func (e *Engine) View(fn func(engine.Tx) error) error { return e.run(beginView, fn) }

// ReadOne reads one key with one statement and no transaction around it
// (engine.StatementReader): a statement outside a transaction reads one
// snapshot and commits itself, so the read costs one round trip and
// nothing after it.
func (e *Engine) ReadOne(bucket, key []byte) (v []byte, err error) {
	e.reads.Add(1)
	e.roundTrips.Add(1)
	err = e.pool.QueryRow(context.Background(), `SELECT v FROM `+tableName(bucket)+` WHERE k = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// Follow reads index's value under key and the row of target it names in
// one statement with no transaction around it, as ReadOne reads one key.
func (e *Engine) Follow(index, key, target []byte) (v []byte, err error) {
	e.reads.Add(1)
	e.roundTrips.Add(1)
	err = e.pool.QueryRow(context.Background(), `SELECT t.v FROM `+tableName(index)+` i JOIN `+tableName(target)+` t ON t.k = i.v WHERE i.k = $1`, key).Scan(&v)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return v, err
}

// FollowBeside reads what Follow reads and the row beside names, in one
// statement with no transaction around it: two scalar subqueries in one
// row, each NULL when it finds nothing, both read from the statement's one
// snapshot.
func (e *Engine) FollowBeside(index, key, target []byte, beside engine.Key) (followed, other []byte, err error) {
	e.reads.Add(1)
	e.roundTrips.Add(1)
	err = e.pool.QueryRow(context.Background(),
		`SELECT (SELECT t.v FROM `+tableName(index)+` i JOIN `+tableName(target)+` t ON t.k = i.v WHERE i.k = $1),`+
			` (SELECT v FROM `+tableName(beside.Bucket)+` WHERE k = $2)`, key, beside.Key).Scan(&followed, &other)
	return followed, other, err
}

// The statements that open a transaction. Neither is sent alone: it goes
// in one pipelined batch with the transaction's first statement (pgTx).
const (
	beginUpdate = "BEGIN ISOLATION LEVEL SERIALIZABLE READ WRITE"
	beginView   = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
)

// maxAttempts bounds the reruns of one transaction that keeps losing
// conflicts; the last error is returned.
const maxAttempts = 50

func (e *Engine) run(begin string, fn func(engine.Tx) error) error {
	ctx := context.Background()
	var err error
	for attempt := range maxAttempts {
		if attempt > 0 {
			// Jittered, growing pause, so the transactions that conflicted
			// do not meet again at once.
			time.Sleep(time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 6))))
		}
		var at string
		at, err = e.attempt(ctx, begin, fn)
		if code := pgErrCode(err); code != "40001" && code != "40P01" {
			return err
		}
		e.retries.Add(1)
		e.conflictsMu.Lock()
		if e.conflicts == nil {
			e.conflicts = map[string]uint64{}
		}
		e.conflicts[at]++
		e.conflictsMu.Unlock()
	}
	return err
}

// Stats reports the pool's connections and the conflicts retried.
func (e *Engine) Stats() engine.Stats {
	st := e.pool.Stat()
	e.conflictsMu.Lock()
	conflicts := maps.Clone(e.conflicts)
	e.conflictsMu.Unlock()
	return engine.Stats{
		AcquiredConns: st.AcquiredConns(), IdleConns: st.IdleConns(),
		TotalConns: st.TotalConns(), MaxConns: st.MaxConns(),
		TxRetries: e.retries.Load(), RoundTrips: e.roundTrips.Load(), Reads: e.reads.Load(),
		Conflicts: conflicts,
	}
}

// attempt runs fn once in a transaction opened by begin. Round trips: one
// per read (the first carries the BEGIN), and one for the writes with the
// COMMIT; a view ends with a COMMIT of its own, which its caller does not
// wait for (endView). A transaction that neither read nor wrote costs none.
// at names the statement that failed, when one did (see
// engine.Stats.Conflicts).
func (e *Engine) attempt(ctx context.Context, begin string, fn func(engine.Tx) error) (at string, err error) {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return "", err
	}
	t := &pgTx{e: e, ctx: ctx, conn: conn, begin: begin, writes: map[string]*pgWrites{}}
	err = fn(t)
	if err == nil && begin == beginView && t.begun {
		e.roundTrips.Add(1) // counted now: Stats never misses a view that returned
		go t.endView()
		return "", nil
	}
	defer conn.Release()
	if err == nil {
		err = t.commit()
	}
	if err != nil && conn.Conn().PgConn().TxStatus() != 'I' {
		// A failed or abandoned transaction; a connection that cannot even
		// roll back is not idle, and the pool closes it on Release.
		conn.Exec(ctx, "ROLLBACK")
	}
	return t.failedAt, err
}

func pgErrCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// pgTx is one transaction on one connection. It is opened lazily: the
// BEGIN is queued before the first statement, in the same pipelined batch.
// Writes are kept, per bucket, until commit; reads see them (a Get or Scan
// after a Put in the same transaction answers the Put).
type pgTx struct {
	e      *Engine
	ctx    context.Context
	conn   *pgxpool.Conn
	begin  string
	begun  bool
	writes map[string]*pgWrites
	// readBytes is what the buckets' read maps and kept scans hold, at
	// most readCacheBytes.
	readBytes int
	// failedAt names the statement that failed: "read <bucket>", "write
	// <bucket>", "delete <bucket>", or "begin" or "commit".
	failedAt string
}

// readCacheBytes bounds what one transaction keeps of its Gets: an op's
// few reads fit many times over, while a check that reads every blob in
// one transaction keeps no more than this (at 100k items it kept 1.3 GiB).
// A Get past the bound asks the server again, and finds the same.
const readCacheBytes = 1 << 20

// pgWrites is one bucket's pending writes: key to value, nil for a delete.
type pgWrites struct {
	table string
	// bucket is the bucket's name, as Stats.Conflicts names it.
	bucket string
	set    map[string][]byte
	// read keeps what each Get of this transaction found (nil: no row),
	// up to readCacheBytes for the transaction. The transaction reads one
	// snapshot, so a second Get of a key would find the same, and costs no
	// round trip.
	read map[string][]byte
	// scanned keeps the stored rows each Scan's query found, by the query
	// (pgBucket.stored), within the same bound: the same query finds the same
	// rows in the transaction's one snapshot, and a Scan merges the pending
	// writes into them afresh. A lifecycle op on an account with a quota
	// scans its open transfers once for the op and once for each blob it
	// stores.
	scanned map[string][]pgPair
}

func (t *pgTx) Bucket(name []byte) engine.Bucket {
	w := t.writes[string(name)]
	if w == nil {
		w = &pgWrites{table: tableName(name), bucket: string(name), set: map[string][]byte{}, read: map[string][]byte{}, scanned: map[string][]pgPair{}}
		t.writes[string(name)] = w
	}
	return pgBucket{t: t, w: w}
}

// query runs one read of w's table in the transaction, opening it with the
// same round trip when it is the first statement, and collects its rows.
func (t *pgTx) query(w *pgWrites, sql string, args ...any) ([]pgPair, error) {
	var pairs []pgPair
	err := t.read(func(b *pgx.Batch) { b.Queue(sql, args...) }, func(br pgx.BatchResults) (err error) {
		if pairs, err = collectPairs(br); err != nil {
			t.failedAt = "read " + w.bucket
		}
		return err
	})
	return pairs, err
}

// read sends the statements queue queues as one round trip, behind the
// BEGIN when the transaction is not open yet, and hands their results to
// collect, which names in failedAt the statement that failed.
func (t *pgTx) read(queue func(*pgx.Batch), collect func(pgx.BatchResults) error) error {
	var b pgx.Batch
	opening := !t.begun
	if opening {
		b.Queue(t.begin)
		t.begun = true
	}
	queue(&b)
	t.e.reads.Add(1)
	t.e.roundTrips.Add(1)
	br := t.conn.SendBatch(t.ctx, &b)
	if opening {
		if _, err := br.Exec(); err != nil {
			t.failedAt = "begin"
			br.Close()
			return err
		}
	}
	if err := collect(br); err != nil {
		br.Close()
		return err
	}
	return br.Close()
}

// collectPairs reads the rows of the batch's next query.
func collectPairs(br pgx.BatchResults) ([]pgPair, error) {
	rows, err := br.Query()
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

// Prefetch reads the keys this transaction has neither read nor written in
// one round trip and keeps what it finds (and that a key has no row) in the
// buckets' read maps, within readCacheBytes: a Get of them then costs no
// round trip. Each key is the statement a Get sends (selectKey), whose plan
// is a look-up in the key's index. One statement of many keys (k = ANY($1))
// is not: a cached plan of it scanned tables of a few thousand rows whole,
// and a batch's 350 keys took 16 ms to read that way against 2.8 ms a key
// each.
func (t *pgTx) Prefetch(keys []engine.Key) error {
	type wanted struct {
		w   *pgWrites
		key []byte
	}
	var ask []wanted
	var asked map[string]bool // a batch's callers name many keys alike
	for _, k := range keys {
		w := t.Bucket(k.Bucket).(pgBucket).w
		if _, written := w.set[string(k.Key)]; written {
			continue
		}
		if _, read := w.read[string(k.Key)]; read {
			continue
		}
		if asked == nil {
			asked = map[string]bool{}
		}
		if name := w.table + " " + string(k.Key); !asked[name] {
			asked[name] = true
			ask = append(ask, wanted{w, k.Key})
		}
	}
	if len(ask) == 0 {
		return nil
	}
	return t.read(func(b *pgx.Batch) {
		for _, a := range ask {
			b.Queue(a.w.selectKey(), a.key)
		}
	}, func(br pgx.BatchResults) error {
		for _, a := range ask {
			pairs, err := collectPairs(br)
			if err != nil {
				t.failedAt = "read " + a.w.bucket
				return err
			}
			var v []byte
			if len(pairs) > 0 {
				v = pairs[0].v
			}
			t.keepRead(a.w, a.key, v)
		}
		return nil
	})
}

// selectKey is the statement that reads one key of the table: a look-up in
// its index.
func (w *pgWrites) selectKey() string { return `SELECT k, v FROM ` + w.table + ` WHERE k = $1` }

// keepRead keeps what a read of key found (nil: no row) in the bucket's
// read map, while the transaction's reads stay within readCacheBytes.
func (t *pgTx) keepRead(w *pgWrites, key, v []byte) {
	if _, kept := w.read[string(key)]; kept {
		return
	}
	if size := len(key) + len(v); t.readBytes+size <= readCacheBytes {
		w.read[string(key)] = v
		t.readBytes += size
	}
}

// endView commits a view that read, and releases its connection. A view
// wrote nothing and read one snapshot (REPEATABLE READ READ ONLY), so its
// answers are final when its last read returns, and no outcome of the
// COMMIT can change them: it runs after the view has returned, and a
// request that only reads waits for its reads alone. The connection stays
// out of the pool until the COMMIT is answered; a COMMIT that fails leaves
// it in a transaction, and the pool closes it on Release.
func (t *pgTx) endView() {
	defer t.conn.Release()
	if _, err := t.conn.Exec(t.ctx, "COMMIT"); err != nil && t.conn.Conn().PgConn().TxStatus() != 'I' {
		t.conn.Exec(t.ctx, "ROLLBACK")
	}
}

// commit sends every pending write and the COMMIT in one pipelined batch
// (with the BEGIN in front when nothing was read): a statement per delete,
// and one per table for its stored rows. A transaction that neither read
// nor wrote sends nothing.
func (t *pgTx) commit() error {
	var b pgx.Batch
	var stmts []string // what each statement queued is, for failedAt
	if !t.begun {
		b.Queue(t.begin)
		stmts = append(stmts, "begin")
	}
	opened := b.Len()
	for _, w := range t.writes {
		var keys, values [][]byte
		for k, v := range w.set {
			if v == nil {
				b.Queue(`DELETE FROM `+w.table+` WHERE k = $1`, []byte(k))
				stmts = append(stmts, "delete "+w.bucket)
			} else {
				keys, values = append(keys, []byte(k)), append(values, v)
			}
		}
		if len(keys) > 0 {
			stmts = append(stmts, "write "+w.bucket)
		}
		switch len(keys) {
		case 0:
		case 1:
			b.Queue(`INSERT INTO `+w.table+` (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, keys[0], values[0])
		default:
			// One statement for the table's rows: a batch of ops writes
			// hundreds, and a statement each costs the server more than
			// the row. The keys are distinct (a map's), as ON CONFLICT
			// DO UPDATE needs.
			b.Queue(`INSERT INTO `+w.table+` (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = EXCLUDED.v`, keys, values)
		}
	}
	if !t.begun && b.Len() == opened {
		return nil // no read, no write: nothing to commit
	}
	t.begun = true
	b.Queue("COMMIT")
	stmts = append(stmts, "commit")
	t.e.roundTrips.Add(1)
	br := t.conn.SendBatch(t.ctx, &b)
	for _, stmt := range stmts {
		if _, err := br.Exec(); err != nil {
			t.failedAt = stmt
			br.Close()
			return err
		}
	}
	return br.Close()
}

type pgBucket struct {
	t *pgTx
	w *pgWrites
}

func (b pgBucket) Get(key []byte) ([]byte, error) {
	if v, ok := b.w.set[string(key)]; ok {
		return v, nil
	}
	if v, ok := b.w.read[string(key)]; ok {
		return v, nil
	}
	rows, err := b.t.query(b.w, b.w.selectKey(), key)
	if err != nil {
		return nil, err
	}
	var v []byte
	if len(rows) > 0 {
		v = rows[0].v
	}
	b.t.keepRead(b.w, key, v)
	return v, nil
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
func (b pgBucket) Scan(r engine.Range, fn func(k, v []byte) error) error {
	if err := engine.CheckRange(r); err != nil {
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
	stored, err := b.stored(r, deletes)
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
			if errors.Is(err, engine.ErrStopScan) {
				return nil
			}
			return err
		}
	}
	return nil
}

type pgPair struct{ k, v []byte }

// stored is the table's rows in r, extra more than r.Limit, from the
// transaction's earlier Scan with the same query when it kept its rows.
func (b pgBucket) stored(r engine.Range, extra int) ([]pgPair, error) {
	query := fmt.Sprintf("%x %x %d %t %d", r.From, r.To, r.Limit, r.Reverse, extra)
	if rows, ok := b.w.scanned[query]; ok {
		return rows, nil
	}
	rows, err := b.query(r, extra)
	if err != nil {
		return nil, err
	}
	size := len(query)
	for _, p := range rows {
		size += len(p.k) + len(p.v)
	}
	if b.t.readBytes+size <= readCacheBytes {
		b.w.scanned[query] = rows
		b.t.readBytes += size
	}
	return rows, nil
}

// query reads the table's rows in r, extra more than r.Limit.
func (b pgBucket) query(r engine.Range, extra int) ([]pgPair, error) {
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
	return b.t.query(b.w, q, args...)
}
