// Command webhookcerts writes, into -dir, a CA (ca.crt) and a serving certificate for 127.0.0.1
// signed by it (tls.crt, tls.key), for the testbed's JobSet and trainer webhooks (see
// test/e2e/testbed/webhookcert). The CA's key is never written: nothing else is ever signed by it.
package main

import (
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/gantry-dev/gantry/test/e2e/testbed/webhookcert"
)

func main() {
	dir := flag.String("dir", "", "where to write ca.crt, tls.crt and tls.key")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "webhookcerts: -dir is required")
		os.Exit(2)
	}
	if err := webhookcert.Write(*dir, time.Now()); err != nil {
		fmt.Fprintln(os.Stderr, "webhookcerts:", err)
		os.Exit(1)
	}
}
