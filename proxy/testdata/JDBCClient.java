import java.sql.*;

// A pgjdbc session against dpproxy, driven by TestJDBC: metadata, a
// prepared DP aggregate executed more than 5 times (server-side named
// statements), a fetch size (named portals with row limits), a refused
// query, session statements and isValid().
public class JDBCClient {
    public static void main(String[] args) throws Exception {
        Connection c = DriverManager.getConnection(args[0], "alice", "alice");
        DatabaseMetaData md = c.getMetaData();
        ResultSet rs = md.getTables(null, "public", "%", new String[] {"TABLE"});
        while (rs.next()) System.out.println("table " + rs.getString("TABLE_NAME"));
        rs = md.getColumns(null, "public", "visits", "%");
        while (rs.next()) System.out.println("column " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME"));
        rs = md.getPrimaryKeys(null, "public", "patients");
        while (rs.next()) System.out.println("pk " + rs.getString("COLUMN_NAME"));
        PreparedStatement ps = c.prepareStatement("SELECT COUNT(*) FROM visits WHERE age > ?");
        for (int i = 0; i < 7; i++) {
            ps.setInt(1, 30 + i);
            rs = ps.executeQuery();
            rs.next();
            System.out.println("count " + rs.getLong(1));
        }
        c.setAutoCommit(false);
        Statement st = c.createStatement();
        st.setFetchSize(2);
        rs = st.executeQuery("SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department");
        int n = 0;
        while (rs.next()) {
            if (rs.getLong(2) != 42 || rs.getBigDecimal(3).doubleValue() != 12.5) throw new Exception("bad row");
            n++;
        }
        System.out.println("rows " + n);
        c.commit();
        c.setAutoCommit(true);
        try {
            st.executeQuery("SELECT * FROM visits");
            System.out.println("not refused");
        } catch (SQLException e) {
            System.out.println("refused " + e.getSQLState());
        }
        // pgjdbc's start-up parameters reach the (pooled) shadow connection.
        rs = st.executeQuery("SELECT current_setting('extra_float_digits') || ' ' || current_setting('application_name')");
        rs.next();
        System.out.println("shadow settings " + rs.getString(1));
        // What BI tools send to read result types: answered by the shadow.
        rs = st.executeQuery("SELECT * FROM \"public\".\"visits\" WHERE 1 <> 1 LIMIT 0");
        ResultSetMetaData rmd = rs.getMetaData();
        System.out.println("empty " + rmd.getColumnCount() + " " + rmd.getColumnName(5) + " " + rmd.getColumnTypeName(5) + " " + rs.next());
        // A public column's values: answered from the policy.
        rs = st.executeQuery("SELECT DISTINCT department FROM visits ORDER BY department");
        StringBuilder deps = new StringBuilder();
        while (rs.next()) deps.append(deps.length() > 0 ? "," : "").append(rs.getString(1));
        System.out.println("distinct " + deps);
        st.execute("SET dp.epsilon = 0.25");
        rs = st.executeQuery("SHOW dp.epsilon");
        rs.next();
        System.out.println("epsilon " + rs.getString(1));
        rs = st.executeQuery("SHOW TRANSACTION ISOLATION LEVEL");
        rs.next();
        System.out.println("isolation " + rs.getString(1));
        System.out.println("valid " + c.isValid(2));
        c.close();
    }
}
