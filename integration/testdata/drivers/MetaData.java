import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Properties;

// Calls every catalog method of pgjdbc's DatabaseMetaData (what sqlline's
// !tables, !columns, !primarykeys, !importedkeys, !exportedkeys,
// !indexes, !procedures, !typeinfo and !metadata run, and what DBeaver
// and other JDBC tools read) through the proxy, and prints one line per
// method: "ok NAME ROWS" or "fail NAME SQLSTATE MESSAGE". Usage:
// java -cp .:postgresql.jar MetaData URL USER PASSWORD
public class MetaData {
    interface Call {
        ResultSet run(DatabaseMetaData md) throws SQLException;
    }

    static void check(DatabaseMetaData md, String name, Call c) {
        try (ResultSet rs = c.run(md)) {
            int n = 0;
            while (rs.next()) {
                n++;
            }
            System.out.println("ok " + name + " " + n);
        } catch (SQLException e) {
            System.out.println("fail " + name + " " + e.getSQLState() + " " + e.getMessage().replace('\n', ' '));
        }
    }

    public static void main(String[] args) throws Exception {
        Properties p = new Properties();
        p.setProperty("user", args[1]);
        p.setProperty("password", args[2]);
        try (Connection conn = DriverManager.getConnection(args[0], p)) {
            DatabaseMetaData md = conn.getMetaData();
            check(md, "getCatalogs", m -> m.getCatalogs());
            check(md, "getSchemas", m -> m.getSchemas());
            check(md, "getSchemasPattern", m -> m.getSchemas(null, "pub%"));
            check(md, "getTableTypes", m -> m.getTableTypes());
            check(md, "getTables", m -> m.getTables(null, null, "%", null));
            check(md, "getTablesView", m -> m.getTables(null, "public", "%", new String[] {"TABLE", "VIEW"}));
            check(md, "getColumns", m -> m.getColumns(null, "public", "visits", "%"));
            check(md, "getColumnsAll", m -> m.getColumns(null, null, "%", "%"));
            check(md, "getPrimaryKeys", m -> m.getPrimaryKeys(null, "public", "patients"));
            check(md, "getImportedKeys", m -> m.getImportedKeys(null, "public", "visits"));
            check(md, "getExportedKeys", m -> m.getExportedKeys(null, "public", "patients"));
            check(md, "getCrossReference", m -> m.getCrossReference(null, "public", "patients", null, "public", "visits"));
            check(md, "getIndexInfo", m -> m.getIndexInfo(null, "public", "patients", false, true));
            check(md, "getBestRowIdentifier", m -> m.getBestRowIdentifier(null, "public", "patients", DatabaseMetaData.bestRowSession, true));
            check(md, "getVersionColumns", m -> m.getVersionColumns(null, "public", "patients"));
            check(md, "getTablePrivileges", m -> m.getTablePrivileges(null, "public", "%"));
            check(md, "getColumnPrivileges", m -> m.getColumnPrivileges(null, "public", "visits", "%"));
            check(md, "getProcedures", m -> m.getProcedures(null, "public", "%"));
            check(md, "getProcedureColumns", m -> m.getProcedureColumns(null, "pg_catalog", "abs", "%"));
            check(md, "getFunctions", m -> m.getFunctions(null, "pg_catalog", "abs"));
            check(md, "getFunctionColumns", m -> m.getFunctionColumns(null, "pg_catalog", "abs", "%"));
            check(md, "getTypeInfo", m -> m.getTypeInfo());
            check(md, "getUDTs", m -> m.getUDTs(null, "public", "%", null));
            check(md, "getSuperTypes", m -> m.getSuperTypes(null, "public", "%"));
            check(md, "getSuperTables", m -> m.getSuperTables(null, "public", "%"));
            check(md, "getAttributes", m -> m.getAttributes(null, "public", "%", "%"));
            check(md, "getClientInfoProperties", m -> m.getClientInfoProperties());
            check(md, "getPseudoColumns", m -> m.getPseudoColumns(null, "public", "%", "%"));
            try {
                System.out.println("ok getDatabaseProductVersion " + md.getDatabaseProductVersion());
                System.out.println("ok getSQLKeywords " + md.getSQLKeywords().length());
                System.out.println("ok getUserName " + md.getUserName());
                System.out.println("ok isReadOnly " + md.isReadOnly());
            } catch (SQLException e) {
                System.out.println("fail scalar " + e.getSQLState() + " " + e.getMessage().replace('\n', ' '));
            }
        }
    }
}
