// Command kubectl-gantry is the kubectl plugin of Gantry: on PATH, kubectl runs it as kubectl gantry.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/component-base/logs"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/gantry-dev/gantry/internal/cli"
)

func main() {
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// What client-go and controller-runtime log goes to stderr through klog, at the verbosity of -v.
	logs.InitLogs()
	defer logs.FlushLogs()
	ctrllog.SetLogger(klog.Background())
	cmd := cli.NewRootCommand(cli.NewOptions(genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}))
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}
