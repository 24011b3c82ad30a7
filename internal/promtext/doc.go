// Package promtext writes the Prometheus text exposition format for the kernel: the
// samples, series and histograms of a page ([AppendSample], [AppendHist]), and the
// sharing of one VictoriaMetrics set by several named writers ([Join]), so that they
// make one valid page with each family once.
//
// It knows no kernel: its writers are the kernel's, passed in as functions.
package promtext
