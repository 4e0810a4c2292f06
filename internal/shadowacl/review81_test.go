package shadowacl

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/dpproxy/dpproxy/internal/pgtest"
	"github.com/dpproxy/dpproxy/pgsql"
)

// TestRestrictFunctions_QuotedOwner (review 81): a shadow database whose
// owner's name needs quoting (upper case, a hyphen) cannot be restricted:
// datdba::regrole::text is already quoted, and format's %I quotes it again.
func TestRestrictFunctions_QuotedOwner(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dsn := pgtest.NewDatabase(t)
	owner := fmt.Sprintf("Shadow-Owner-%d", os.Getpid())
	if err := pgtest.Exec(ctx, dsn, `DROP ROLE IF EXISTS "`+owner+`"`, `CREATE ROLE "`+owner+`"`,
		`DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO %I', current_database(), '`+owner+`'); END $$`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = pgtest.Exec(context.Background(), dsn, `DO $$ BEGIN EXECUTE format('ALTER DATABASE %I OWNER TO CURRENT_USER', current_database()); END $$`,
			`DROP OWNED BY "`+owner+`"`, `DROP ROLE IF EXISTS "`+owner+`"`)
	})
	if _, err := RestrictFunctions(ctx, dsn, owner, pgsql.CatalogFunctionNames()); err != nil {
		t.Fatalf("RestrictFunctions with shadow owner %q: %v", owner, err)
	}
}
