// Command kvq measures what a low-precision KV cache saves and costs.
package main

import (
	"os"

	"github.com/kvqlabs/kvq/cmd/kvq/internal/cli/root"
)

// version is set with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	os.Exit(root.Main(os.Args[1:], version))
}
