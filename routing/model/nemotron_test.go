package model_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kvroute/kvroute/routing/layout"
	"github.com/kvroute/kvroute/routing/model"
)

const nemotronDir = "../../testdata/nemotron-test-model"

func TestLoadNemotron(t *testing.T) {
	m, err := model.Load(nemotronDir)
	if err != nil {
		t.Fatal(err)
	}
	want := layout.TokenIDs{VisionStart: 19, VisionEnd: 20, ImagePad: 18, VideoPad: 18}
	if !m.Vision || m.TokenIDs != want || m.Template == nil {
		t.Fatalf("vision %v ids %+v template %v", m.Vision, m.TokenIDs, m.Template != nil)
	}
	// A folder whose config.json lacks a field the adapter needs is refused at load (start-up),
	// naming the field.
	dir := t.TempDir()
	for _, f := range []string{"tokenizer.json", "chat_template.jinja"} {
		b, err := os.ReadFile(filepath.Join(nemotronDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := os.ReadFile(filepath.Join(nemotronDir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(cfg), `"video_maintain_aspect_ratio": true,`, "", 1)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(dir); err == nil || !strings.Contains(err.Error(), "video_maintain_aspect_ratio is missing") {
		t.Errorf("load without video_maintain_aspect_ratio: %v", err)
	}
	// A config.json whose <image> id is not the tokenizer's is refused too.
	noImg := strings.Replace(string(cfg), `"img_context_token_id": 18`, `"img_context_token_id": 19`, 1)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(noImg), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := model.Load(dir); err == nil || !strings.Contains(err.Error(), "img_context_token_id is 19") {
		t.Errorf("load with a wrong img_context_token_id: %v", err)
	}
}
