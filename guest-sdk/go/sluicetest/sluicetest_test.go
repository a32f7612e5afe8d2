package sluicetest_test

import (
	"errors"
	"strings"
	"testing"

	"sluice.dev/sluice"
	"sluice.dev/sluice/sluicetest"
)

var stage string

// A transform like the guides' won-deals: deals at a stage keyed by id, deletes as
// tombstones, rows without an id rejected.
func init() {
	sluice.OnInit(func(p sluice.Params) error {
		stage = p.Get("stage", "closedwon")
		if stage == "" {
			return errors.New("stage is empty")
		}
		sluice.Logf(sluice.LevelInfo, "Publishing deals at stage %s.", stage)
		return nil
	})
	sluice.OnBatch(func(b *sluice.Batch, out *sluice.Output) error {
		ids, err := b.Column("documentId")
		if err != nil {
			return err
		}
		won, err := b.SelectWhere("stage", sluice.Equal, stage)
		if err != nil {
			return err
		}
		for _, row := range won.ChangeTypes(sluice.Insert, sluice.UpdatePostimage).Rows() {
			id, ok := ids.String(row)
			if !ok {
				out.Reject(row, "The deal has no documentId.")
				continue
			}
			out.Emit(row, sluice.Record{Key: []byte(id), Value: []byte(stage), Headers: []sluice.Header{{Key: "op", Value: []byte(b.ChangeType(row).String())}}})
		}
		for _, row := range b.SelectChangeTypes(sluice.Delete).Rows() {
			id, _ := ids.String(row)
			out.EmitKV(row, []byte(id), nil)
		}
		if b.Rows() > 4 {
			return sluice.FailRow(4, "Row %d is one too many.", 4)
		}
		return nil
	})
}

func batch() sluicetest.Batch {
	return sluicetest.Batch{
		Columns: []sluicetest.Column{
			{Name: "documentId", Values: []any{"d1", nil, "d3", "d4"}},
			{Name: "stage", Values: []any{"closedwon", "closedwon", "open", "closedwon"}},
		},
		ChangeTypes: []sluice.ChangeType{sluice.Insert, sluice.UpdatePostimage, sluice.Insert, sluice.Delete},
	}
}

func TestRunCallsInitAndTheBatchFunctionAsTheHostDoes(t *testing.T) {
	result, err := sluicetest.Run(batch(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(result.Records) != 2 || string(result.Records[0].Key) != "d1" || result.Records[0].Row != 0 {
		t.Fatalf("records %+v", result.Records)
	}
	if h := result.Records[0].Headers; len(h) != 1 || string(h[0].Value) != "insert" {
		t.Fatalf("headers %+v", h)
	}
	if tomb := result.Records[1]; string(tomb.Key) != "d4" || tomb.Value != nil {
		t.Fatalf("tombstone %+v", tomb)
	}
	if len(result.Rejected) != 1 || result.Rejected[0] != (sluicetest.Rejection{Row: 1, Message: "The deal has no documentId."}) {
		t.Fatalf("rejected %+v", result.Rejected)
	}
	if len(result.Logs) != 1 || result.Logs[0] != "INFO Publishing deals at stage closedwon." {
		t.Fatalf("logs %q", result.Logs)
	}
}

func TestErrorsComeBackAsTheHostSeesThem(t *testing.T) {
	if _, err := sluicetest.Run(batch(), map[string]string{"stage": ""}); err == nil || err.Error() != "init failed: stage is empty" {
		t.Fatalf("init: %v", err)
	}
	b := batch()
	b.Columns = append(b.Columns[:1:1], sluicetest.Column{Name: "other", Values: []any{1, 2, 3, 4}})
	if _, err := sluicetest.Run(b, nil); err == nil || !strings.Contains(err.Error(), "no column named `stage`") {
		t.Fatalf("unknown column: %v", err)
	}
	b = batch()
	for i := range b.Columns {
		b.Columns[i].Values = append(b.Columns[i].Values, "d5")
	}
	b.ChangeTypes = append(b.ChangeTypes, sluice.Insert)
	_, err := sluicetest.Run(b, nil)
	var rowErr *sluice.RowError
	if !errors.As(err, &rowErr) || rowErr.Row != 4 || rowErr.Message != "Row 4 is one too many." {
		t.Fatalf("row error: %v", err)
	}
}

func TestAComparisonTheHostRefusesIsRefusedWithItsWords(t *testing.T) {
	b := batch()
	b.Columns[1] = sluicetest.Column{Name: "stage", Values: []any{1, 2, 3, 4}}
	_, err := sluicetest.Run(b, nil)
	if err == nil || err.Error() != "Cannot compare column `stage` (integer) with Text(\"closedwon\")." {
		t.Fatalf("got %v", err)
	}
}

func TestABatchWhoseColumnsDisagreeIsRefused(t *testing.T) {
	_, err := sluicetest.Run(sluicetest.Batch{Columns: []sluicetest.Column{
		{Name: "a", Values: []any{1}},
		{Name: "b", Values: []any{1, 2}},
	}}, nil)
	if err == nil || !strings.Contains(err.Error(), "every column needs one per row") {
		t.Fatalf("got %v", err)
	}
}
