import java.sql.*;

// PublicTable reads a public table through dpproxy with pgjdbc: the same
// prepared SELECT executed 6 times (pgjdbc switches to a named server-side
// statement after 5), binary transfer of its rows, DatabaseMetaData of its
// columns, and a fetch-size cursor (named portal, row limits) over it.
// Prints "row ..." lines of the last execution, "column ..." lines and
// "fetched N".
public class PublicTable {
    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[1])) {
            String last = "";
            try (PreparedStatement ps = c.prepareStatement("SELECT * FROM wards WHERE beds >= ? ORDER BY ward_id")) {
                for (int i = 0; i < 6; i++) {
                    ps.setInt(1, 0);
                    StringBuilder sb = new StringBuilder();
                    try (ResultSet rs = ps.executeQuery()) {
                        int n = rs.getMetaData().getColumnCount();
                        while (rs.next()) {
                            sb.append("row");
                            for (int j = 1; j <= n; j++) {
                                sb.append(' ').append(rs.getString(j));
                            }
                            sb.append('\n');
                        }
                    }
                    if (i > 0 && !sb.toString().equals(last)) {
                        throw new RuntimeException("execution " + i + " differs");
                    }
                    last = sb.toString();
                }
            }
            System.out.print(last);
            try (ResultSet rs = c.getMetaData().getColumns(null, "public", "wards", null)) {
                while (rs.next()) {
                    System.out.println("column " + rs.getString("COLUMN_NAME") + " " + rs.getString("TYPE_NAME"));
                }
            }
            c.setAutoCommit(false);
            try (Statement st = c.createStatement()) {
                st.setFetchSize(5);
                int n = 0;
                try (ResultSet rs = st.executeQuery("SELECT ward_id FROM wards")) {
                    while (rs.next()) {
                        n++;
                    }
                }
                System.out.println("fetched " + n);
            }
            c.commit();
        }
    }
}
