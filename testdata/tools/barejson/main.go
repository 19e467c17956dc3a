// Command barejson is the baseline .ci/bench-share sets beside sealbox's
// authenticated GET: a bare net/http server answering every request with
// 200, Content-Type: application/json and the body it was given, with no
// middleware, no log and no store. The script passes the body sealbox
// answered, so both send the same bytes.
//
//	barejson -listen 127.0.0.1:8081 -body '{"user_id":"…"}'
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8081", "address to serve on")
	body := flag.String("body", "{}", "the body of every answer")
	flag.Parse()
	b := []byte(*body)
	log.Fatal(http.ListenAndServe(*listen, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Write(b)
	})))
}
