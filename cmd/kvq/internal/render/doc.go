// Package render prints kvq's command output: tables for people (through
// tablewriter), and JSON, CSV and Markdown for tools and documents; line
// charts, scatter plots (Chart with Markers) and heatmaps as SVG or PNG;
// and self-contained HTML report pages that inline those SVGs.
//
// Commands hand it data, never formatting: a Report holds header-and-rows
// Tables, an optional flat table for CSV and a value for JSON. On a terminal
// tables get light box borders; otherwise they are printed as plain,
// stable, space-aligned columns (no colour, no wrapping, no truncation, no
// trailing spaces), so scripts and golden files can rely on them.
//
// Pictures are drawn once, on a small canvas that is either SVG text
// (hand-written XML) or a raster image (anti-aliased by
// golang.org/x/image/vector, text in Go Regular from
// golang.org/x/image/font/gofont at the SVGs' 12 pixels), so SVG and PNG
// agree. The layout measures text at 7 pixels a character and 13 a line,
// close to both fonts. The same picture always gives the same bytes. HTML pages
// (WriteHTML) fetch nothing: CSS is inline, fonts are the reader's own,
// and all text is escaped; their only script is the inline filter of
// HTMLCards, allowed by its hash, on pages that have cards.
//
// Library packages never import render; only internal/cli does. Functions
// are safe for concurrent use on different writers.
package render
