package s3

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// requestMetrics registers the engine's request latency on reg and returns
// the hook that records into it. A registerer that already holds the series
// (an engine opened before on it) keeps it, and the hook records there.
func requestMetrics(reg prometheus.Registerer) (func(op string, d time.Duration, err error), error) {
	latency := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "sealbox_s3_request_duration_seconds",
		Help:    "Latency of the blob engine's S3 requests by operation and outcome (ok or error).",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	}, []string{"op", "outcome"})
	if err := reg.Register(latency); err != nil {
		var have prometheus.AlreadyRegisteredError
		if !errors.As(err, &have) {
			return nil, err
		}
		if latency, _ = have.ExistingCollector.(*prometheus.HistogramVec); latency == nil {
			return nil, err
		}
	}
	return func(op string, d time.Duration, err error) {
		outcome := "ok"
		if err != nil {
			outcome = "error"
		}
		latency.WithLabelValues(op, outcome).Observe(d.Seconds())
	}, nil
}

// observeBoth calls a, when set, and then b.
func observeBoth(a, b func(string, time.Duration, error)) func(string, time.Duration, error) {
	if a == nil {
		return b
	}
	return func(op string, d time.Duration, err error) {
		a(op, d, err)
		b(op, d, err)
	}
}
