package s3_test

import (
	"bytes"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"sealbox/blobs"
	"sealbox/blobs/blobstest"
	"sealbox/blobs/s3"
	"sealbox/blobs/s3test"
)

// TestS3Metrics: an engine given a registerer registers its request
// latency there, by operation and outcome, under the name dashboards
// query; a second engine opened on the same registerer records into the
// same series instead of failing to open.
func TestS3Metrics(t *testing.T) {
	if !s3test.Enabled() {
		t.Skip("SEALBOX_TEST_S3 is unset")
	}
	reg := prometheus.NewRegistry()
	url := s3test.URL(t)
	var engines []*s3.Engine
	for range 2 {
		s, err := s3.Open(t.Context(), url, s3.Options{Metrics: reg})
		if err != nil {
			t.Fatal(err)
		}
		engines = append(engines, s)
	}
	for i, s := range engines {
		data := blobstest.Bytes(100, uint64(i))
		if _, _, err := s.Put(bytes.NewReader(data), blobs.AddressOf(data), 0); err != nil {
			t.Fatal(err)
		}
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	puts := uint64(0)
	for _, f := range families {
		if f.GetName() != "sealbox_s3_request_duration_seconds" {
			continue
		}
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if strings.Join(labels, " ") == "op=PutObject outcome=ok" {
				puts += m.GetHistogram().GetSampleCount()
			}
		}
	}
	if puts != 2 {
		t.Fatalf("sealbox_s3_request_duration_seconds{op=PutObject,outcome=ok} counts %d requests, want 2 (one per engine)", puts)
	}
}
