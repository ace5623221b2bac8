// Package browsertest drives pgqueueui's dashboard in a real headless
// Chromium (Debian's chromium package) through chromedp. It is a module of
// its own so that chromedp stays out of pgqueue's dependencies; it has
// tests only.
package browsertest
