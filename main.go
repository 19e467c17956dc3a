// Command sealbox is a self-hosted server for an end-to-end encrypted photo
// and media service.
package main

import (
	"os"

	"sealbox/cli"
)

func main() {
	os.Exit(cli.Execute(os.Args[1:]))
}
