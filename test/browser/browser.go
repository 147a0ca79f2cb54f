// Package browser drives headless Chromium (hack/install-chromium.sh, GANTRY_CHROMIUM) through the hub's
// page for the tests that read it as a person would.
package browser

import (
	"bytes"
	"context"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Start starts headless Chromium for the test, for at most timeout, and stops it when the test ends.
func Start(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	exe := os.Getenv("GANTRY_CHROMIUM")
	if exe == "" {
		t.Fatal("GANTRY_CHROMIUM is not set: run make test, or set it to the output of hack/install-chromium.sh")
	}
	// No background networking: the machine may have no route out, and the page needs none.
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.Flag("disable-quic", true), chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900))
	allocator, cancelAllocator := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelBrowser := chromedp.NewContext(allocator)
	ctx, cancelTimeout := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelTimeout(); cancelBrowser(); cancelAllocator() })
	return ctx
}

// Login signs in on the page's login form with the token and waits for the live overview.
func Login(t testing.TB, ctx context.Context, endpoint, token string) {
	t.Helper()
	if err := chromedp.Do(ctx, chromedp.Navigate(endpoint+"/login"), chromedp.SetValue("#token", token),
		chromedp.Submit("#login"), chromedp.WaitVisible(`body[data-live="true"]`)); err != nil {
		t.Fatalf("logging in to the hub's page: %v", err)
	}
}

// Text is the text of the first element the selector finds.
func Text(t testing.TB, ctx context.Context, selector string) string {
	t.Helper()
	text, err := chromedp.Run(ctx, chromedp.Text(selector))
	if err != nil {
		t.Fatalf("reading %s of the page: %v", selector, err)
	}
	return text
}

// Screenshot takes a PNG of the whole page, checks it is one, and keeps it in ArtifactsDir for a
// person to look at.
func Screenshot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	data, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot of %s: %v", name, err)
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil || cfg.Width < 100 || cfg.Height < 100 {
		t.Fatalf("screenshot of %s is no page-sized PNG: %v %+v", name, err, cfg)
	}
	path := filepath.Join(ArtifactsDir(), fmt.Sprintf("%s-%s.png", strings.ReplaceAll(t.Name(), "/", "-"), name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err == nil {
		_ = os.WriteFile(path, data, 0o644)
	}
	t.Logf("screenshot of %s: %dx%d, %s", name, cfg.Width, cfg.Height, path)
}

// ArtifactsDir is where screenshots are kept: $GANTRY_ARTIFACTS, or gantry-e2e-screenshots in the
// temporary directory.
func ArtifactsDir() string {
	if dir := os.Getenv("GANTRY_ARTIFACTS"); dir != "" {
		return dir
	}
	return filepath.Join(os.TempDir(), "gantry-e2e-screenshots")
}
