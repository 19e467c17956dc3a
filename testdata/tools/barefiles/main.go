// Command barefiles is the ceiling .ci/bench-share sets beside nginx for
// share reads: a bare net/http server answering GET and Range requests for
// the files under a directory with http.FileServer (ServeContent, which
// sends a file or a range with sendfile), with no middleware, no log and no
// store. What it makes of nginx's rate is the most any handler on net/http
// can make of it on the machine. With -tls-cert and -tls-key it serves
// HTTPS with crypto/tls's defaults, as sealbox's own TLS does: the ceiling
// over TLS.
//
//	barefiles -listen 127.0.0.1:8082 -root /path/to/blobs [-tls-cert cert.pem -tls-key key.pem]
package main

import (
	"flag"
	"log"
	"net/http"
)

func main() {
	listen := flag.String("listen", "127.0.0.1:8082", "address to serve on")
	root := flag.String("root", ".", "directory whose files are served")
	cert := flag.String("tls-cert", "", "serve HTTPS with this PEM certificate")
	key := flag.String("tls-key", "", "the PEM private key of -tls-cert")
	flag.Parse()
	files := http.FileServer(http.Dir(*root))
	if *cert != "" {
		log.Fatal(http.ListenAndServeTLS(*listen, *cert, *key, files))
	}
	log.Fatal(http.ListenAndServe(*listen, files))
}
