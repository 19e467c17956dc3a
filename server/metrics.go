package server

import (
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"sealbox/kv"
	"sealbox/kv/fault"
)

// metrics are the server's Prometheus series. Labels hold route patterns
// and reasons, never raw paths or anything a caller sent.
type metrics struct {
	registry     *prometheus.Registry
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	authFailures *prometheus.CounterVec
	rateLimited  *prometheus.CounterVec
	// limitRefusals counts refusals by the configured limit that made them
	// (fault.Error.Limit, or a connection-level limit such as a stalled body).
	limitRefusals *prometheus.CounterVec
	series        sync.Map // seriesKey -> *requestSeries
}

func newMetrics(s *Server) *metrics {
	m := &metrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealbox_http_requests_total", Help: "HTTP requests by listener (main or share), route pattern, method and status.",
		}, []string{"listener", "route", "method", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sealbox_http_request_duration_seconds", Help: "HTTP request latency by listener (main or share), route pattern, method and status.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
		}, []string{"listener", "route", "method", "status"}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealbox_auth_failures_total", Help: "Refused sign-in, second-factor, proof and redeem attempts by reason.",
		}, []string{"reason"}),
		rateLimited: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealbox_rate_limited_total", Help: "Requests refused by a rate limit, by route pattern.",
		}, []string{"route"}),
		limitRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sealbox_limit_refusals_total", Help: "Requests or connections refused by a configured limit, by the limit's flag name.",
		}, []string{"limit"}),
	}
	storeSize := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sealbox_store_bytes", Help: "Size of the database file.",
	}, func() float64 {
		size, err := s.store.FileSize()
		if err != nil {
			return 0
		}
		return float64(size)
	})
	blobTotal := func(pick func(count, bytes int64) int64) func() float64 {
		return func() float64 {
			count, bytes, err := s.store.BlobTotals()
			if err != nil {
				return 0
			}
			return float64(pick(count, bytes))
		}
	}
	blobBytes := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sealbox_blob_bytes", Help: "Bytes of all stored blobs, each counted once.",
	}, blobTotal(func(_, bytes int64) int64 { return bytes }))
	blobCount := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sealbox_blobs", Help: "Number of stored blobs.",
	}, blobTotal(func(count, _ int64) int64 { return count }))
	hashWaiting := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sealbox_password_checks_waiting", Help: "Password checks waiting, up to --hash-wait, for a hashing slot.",
	}, func() float64 { return float64(s.hasher.Waiting()) })
	uploadBuffer := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "sealbox_upload_buffer_bytes", Help: "Memory reserved by the uploads in flight for their bodies (--upload-buffer-account, --upload-buffer-total).",
	}, func() float64 { return float64(s.uploadBuffers.inFlight()) })
	m.registry.MustRegister(m.requests, m.latency, m.authFailures, m.rateLimited, m.limitRefusals, storeSize, blobBytes, blobCount, hashWaiting, uploadBuffer,
		accountBytesCollector{s},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, ok := s.store.EngineStats(); ok {
		m.registry.MustRegister(engineCollectors(s)...)
	}
	if len(s.cfg.Witnesses) > 0 {
		m.registry.MustRegister(witnessCollector{s})
	}
	return m
}

// largestAccounts is how many accounts sealbox_account_bytes shows: the
// largest only, so a server of many accounts keeps a bounded series count.
const largestAccounts = 10

var accountBytesDesc = prometheus.NewDesc("sealbox_account_bytes",
	"Bytes held by each of the 10 accounts holding the most, by user id (a blob two accounts hold counts for each).",
	[]string{"user_id"}, nil)

// accountBytesCollector serves the largest accounts' usage, read from the
// store when scraped, so every node sharing the store reports the same.
type accountBytesCollector struct{ s *Server }

func (c accountBytesCollector) Describe(ch chan<- *prometheus.Desc) { ch <- accountBytesDesc }

func (c accountBytesCollector) Collect(ch chan<- prometheus.Metric) {
	top, err := c.s.store.LargestAccounts(largestAccounts)
	if err != nil {
		c.s.log.Warn().Err(err).Msg("metrics: read the largest accounts")
		return
	}
	for _, a := range top {
		ch <- prometheus.MustNewConstMetric(accountBytesDesc, prometheus.GaugeValue, float64(a.Bytes), a.AccountID)
	}
}

// engineCollectors are the series of a store engine that has figures of its
// own (PostgreSQL: kv.EngineStats): its connection pool and the
// transactions it ran again after a conflict. Each reads the figures when
// scraped.
func engineCollectors(s *Server) []prometheus.Collector {
	stat := func(pick func(kv.EngineStats) float64) func() float64 {
		return func() float64 {
			st, _ := s.store.EngineStats()
			return pick(st)
		}
	}
	pool := func(state string, pick func(kv.EngineStats) int32) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sealbox_store_pool_connections",
			Help:        "Connections of the store's pool by state: acquired by a transaction, idle, total, and the pool's maximum.",
			ConstLabels: prometheus.Labels{"state": state},
		}, stat(func(st kv.EngineStats) float64 { return float64(pick(st)) }))
	}
	return []prometheus.Collector{
		pool("acquired", func(st kv.EngineStats) int32 { return st.AcquiredConns }),
		pool("idle", func(st kv.EngineStats) int32 { return st.IdleConns }),
		pool("total", func(st kv.EngineStats) int32 { return st.TotalConns }),
		pool("max", func(st kv.EngineStats) int32 { return st.MaxConns }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sealbox_store_tx_retries_total",
			Help: "Store transactions run again after losing a serialization conflict or a deadlock.",
		}, stat(func(st kv.EngineStats) float64 { return float64(st.TxRetries) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sealbox_store_round_trips_total",
			Help: "Exchanges of the store's transactions with the database server (reads, and writes with their commit).",
		}, stat(func(st kv.EngineStats) float64 { return float64(st.RoundTrips) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "sealbox_store_reads_total",
			Help: "The store's exchanges with the database server that were reads.",
		}, stat(func(st kv.EngineStats) float64 { return float64(st.Reads) })),
	}
}

// MetricsHandler serves the Prometheus metrics, and GET /readyz as the API
// does. It is meant for a separate listener (--metrics-listen), never the
// public API address.
func (s *Server) MetricsHandler() http.Handler {
	mux := http.NewServeMux()
	series := prometheus.Gatherers{s.metrics.registry}
	if s.cfg.EngineMetrics != nil {
		series = append(series, s.cfg.EngineMetrics)
	}
	mux.Handle("/", promhttp.HandlerFor(series, promhttp.HandlerOpts{}))
	// The readiness probe too, for an orchestrator that reaches only the
	// private listener.
	mux.Handle("GET /readyz", s.handler)
	return mux
}

func (m *metrics) observe(listener, route, method string, status int, d time.Duration) {
	key := seriesKey{listener, route, method, status}
	s, ok := m.series.Load(key)
	if !ok {
		code := strconv.Itoa(status)
		s, _ = m.series.LoadOrStore(key, &requestSeries{
			count:   m.requests.WithLabelValues(listener, route, method, code),
			latency: m.latency.WithLabelValues(listener, route, method, code),
		})
	}
	rs := s.(*requestSeries)
	rs.count.Inc()
	rs.latency.Observe(d.Seconds())
}

// seriesKey names the request series of one listener ("main" or "share"),
// route pattern, method name and status. All four come from short fixed
// lists (methodName folds unknown methods), so the series map stays small.
type seriesKey struct {
	listener, route, method string
	status                  int
}

// requestSeries are one seriesKey's counter and histogram, looked up once:
// resolving label values hashes them on every call.
type requestSeries struct {
	count   prometheus.Counter
	latency prometheus.Observer
}

// authFailureReasons are the refusals that an intrusion-prevention tool
// (fail2ban and the like) acts on: each is logged as one structured line
// with the client address and counted.
var authFailureReasons = map[string]string{
	fault.ECodeInvalidCredentials: "invalid_credentials",
	fault.ECodeAccountLocked:      "account_locked",
	fault.ECodeInvalidCode:        "invalid_code",
	fault.ECodeCodeReplayed:       "code_replayed",
	fault.ECodeChallengeExpired:   "challenge_expired",
	fault.ECodeProofRequired:      "proof_required",
	fault.ECodeSessionExpired:     "session_expired",
	// A key swap attempt is what a stolen access token would try first.
	fault.ECodeIdentityKeyMismatch:   "identity_key_mismatch",
	fault.ECodeEnrollmentCodeRefused: "enrollment_code_refused",
}

// rateLimitedAttempts maps the routes whose rate limits refuse attempts to
// authenticate to the reason logged: a guesser held at the limit is still
// guessing, and that is what fail2ban should see. Other limits (share reads)
// refuse no credential and are only counted.
var rateLimitedAttempts = map[string]string{
	"/v1/auth/login/verify-totp":     "challenge_burned",
	"/v1/auth/devices/enroll/redeem": "redeem_rate_limited",
}

// noteRefusal logs and counts an authentication failure or a rate-limit
// refusal. It never logs what the caller presented.
func (s *Server) noteRefusal(r *http.Request, code string) {
	route := infoFrom(r).route
	reason, ok := authFailureReasons[code]
	if code == fault.ECodeRateLimited {
		s.metrics.rateLimited.WithLabelValues(route).Inc()
		reason, ok = rateLimitedAttempts[route]
	}
	if !ok {
		return
	}
	s.metrics.authFailures.WithLabelValues(reason).Inc()
	s.log.Warn().
		Str("event", "auth_failure").
		Str("reason", reason).
		Str("client", s.clientAddr(r)).
		Str("route", route).
		Str("request_id", infoFrom(r).id).
		Msg("authentication refused")
}

// countLimitRefusal counts one refusal by the configured limit named limit
// (a serve flag name without dashes). writeError calls it for every
// fault.Error carrying a Limit; limits enforced below the handlers (a
// connection cut off) call it themselves.
func (s *Server) countLimitRefusal(limit string) {
	s.metrics.limitRefusals.WithLabelValues(limit).Inc()
}
