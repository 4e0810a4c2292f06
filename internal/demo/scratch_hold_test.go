package demo

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
)

func TestScratchHold(t *testing.T) {
	if os.Getenv("SCRATCH_HOLD") == "" {
		t.Skip()
	}
	data, shadow := pgtest.NewCluster(t), pgtest.NewCluster(t)
	ctx := context.Background()
	res, err := Setup(ctx, data, shadow, Options{Patients: 50000, Visits: 1000000})
	if err != nil {
		t.Fatal(err)
	}
	if err := PartitionedCopy(ctx, data, "hosp_part", 8, Options{}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile("/tmp/scratch_dsn", []byte(res.AdminDSN+"\n"+data.DSN("hosp_part")+"\n"), 0o644)
	fmt.Println("READY", res.AdminDSN)
	time.Sleep(40 * time.Minute)
}
