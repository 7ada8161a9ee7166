package fenceview

import (
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/fencestream/fencestream/processors/debounce"
)

// DefaultTiles is OpenStreetMap's standard tile layer: the basemap the page
// draws under the fences unless told otherwise.
const (
	DefaultTiles            = "https://tile.openstreetmap.org/{z}/{x}/{y}.png"
	DefaultTilesAttribution = `&copy; <a href="https://www.openstreetmap.org/copyright">OpenStreetMap</a> contributors`
)

// MapConfig is the page's basemap. The zero value is "no basemap".
type MapConfig struct {
	// Tiles is an XYZ tile URL template with {z}, {x} and {y} (and
	// optionally {s}, {r}), or "" for none: fences on a blank map.
	Tiles string
	// Attribution is the HTML credit the tile provider requires.
	Attribution string
}

// RegisterFlags registers --tiles and --tiles-attribution, defaulting to
// OpenStreetMap's tiles.
func (m *MapConfig) RegisterFlags(fs *flag.FlagSet) {
	m.Tiles, m.Attribution = DefaultTiles, ""
	fs.Func("tiles", `basemap tile URL template of the web page ({z}/{x}/{y}), or "none" to draw fences without a basemap (offline) (default OpenStreetMap: `+DefaultTiles+`)`, func(v string) error {
		if v == "none" {
			v = ""
		}
		m.Tiles = v
		return nil
	})
	fs.StringVar(&m.Attribution, "tiles-attribution", "", "attribution (HTML) the tile provider requires (default: OpenStreetMap's for the default tiles)")
}

// Validate checks the tile URL template.
func (m *MapConfig) Validate() error {
	if m.Tiles == "" {
		return nil
	}
	u, err := url.Parse(strings.NewReplacer("{", "", "}", "").Replace(m.Tiles))
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return fmt.Errorf("--tiles %q: want an http(s) URL template or none", m.Tiles)
	}
	for _, p := range []string{"{z}", "{x}", "{y}"} {
		if !strings.Contains(m.Tiles, p) {
			return fmt.Errorf("--tiles %q lacks %s", m.Tiles, p)
		}
	}
	return nil
}

func (m MapConfig) attribution() string {
	if m.Attribution == "" && m.Tiles == DefaultTiles {
		return DefaultTilesAttribution
	}
	return m.Attribution
}

// Map sets the page's basemap (default: none; the binaries default to
// OpenStreetMap's tiles through MapConfig.RegisterFlags).
func Map(m MapConfig) Opt { return func(c *config) { c.mapCfg = m } }

// DebounceDefaults sets the debounce defaults the debouncer runs with,
// over which each fence's own settings are shown as its effective settings
// (default debounce.DefaultSettings()).
func DebounceDefaults(s debounce.Settings) Opt { return func(c *config) { c.defaults = s } }

// PageConfig is the body of GET /v1/config: what the page needs to know.
type PageConfig struct {
	// Tiles is the basemap's URL template; "" means no basemap.
	Tiles            string `json:"tiles"`
	TilesAttribution string `json:"tiles_attribution,omitempty"`
	// History is how many recent triggers /v1/triggers can return.
	History int `json:"history"`
}

func (s *Server) handleConfig(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, PageConfig{Tiles: s.cfg.mapCfg.Tiles, TilesAttribution: s.cfg.mapCfg.attribution(), History: DefaultHistory})
}

func (c *config) validateMap() error {
	if err := c.mapCfg.Validate(); err != nil {
		return fmt.Errorf("fenceview: %w", err)
	}
	if err := c.defaults.Validate(); err != nil {
		return fmt.Errorf("fenceview: debounce defaults: %w", err)
	}
	return nil
}
