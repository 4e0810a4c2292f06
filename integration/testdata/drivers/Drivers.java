import java.sql.*;
import java.time.LocalDate;
import java.time.LocalDateTime;

// Drivers runs pgjdbc against dpproxy (TestDrivers_JDBC): date and
// timestamp parameters of a DP query (setDate, setTimestamp, setObject of
// LocalDate and LocalDateTime), a time of day answered (as a timestamp), and
// savepoints (setSavepoint, a refused statement, rollback(sp), the
// transaction usable). Prints one line per step.
public class Drivers {
    static long count(PreparedStatement ps) throws SQLException {
        try (ResultSet rs = ps.executeQuery()) {
            rs.next();
            return rs.getLong(1);
        }
    }

    public static void main(String[] args) throws Exception {
        try (Connection c = DriverManager.getConnection(args[0], args[1], args[1])) {
            try (Statement st = c.createStatement()) {
                st.execute("SET dp.epsilon = 0.05");
            }
            String q = "SELECT COUNT(*) FROM visits WHERE visit_date >= ? AND age > ?";
            try (PreparedStatement ps = c.prepareStatement(q)) {
                ps.setDate(1, Date.valueOf("2023-01-01"));
                ps.setInt(2, 10);
                System.out.println("setDate " + (count(ps) > 0));
                ps.setTimestamp(1, Timestamp.valueOf("2023-01-01 00:00:00"));
                ps.setInt(2, 11);
                System.out.println("setTimestamp " + (count(ps) > 0));
                ps.setObject(1, LocalDate.of(2023, 1, 1));
                ps.setInt(2, 12);
                System.out.println("LocalDate " + (count(ps) > 0));
                ps.setObject(1, LocalDateTime.of(2023, 1, 1, 0, 0));
                ps.setInt(2, 13);
                System.out.println("LocalDateTime " + (count(ps) > 0));
                ps.setObject(1, LocalDateTime.of(2023, 1, 1, 10, 30));
                ps.setInt(2, 14);
                try {
                    count(ps);
                    System.out.println("time of day accepted");
                } catch (SQLException e) {
                    System.out.println("time of day refused " + e.getSQLState());
                }
            }
            c.setAutoCommit(false);
            Savepoint sp = c.setSavepoint();
            try (Statement st = c.createStatement()) {
                st.executeQuery("SELECT * FROM visits");
                System.out.println("refused none");
            } catch (SQLException e) {
                System.out.println("refused " + e.getSQLState());
            }
            c.rollback(sp);
            try (Statement st = c.createStatement(); ResultSet rs = st.executeQuery("SELECT department, COUNT(*) FROM visits GROUP BY department")) {
                int n = 0;
                while (rs.next()) {
                    n++;
                }
                System.out.println("after rollback(sp) groups " + n);
            }
            Savepoint named = c.setSavepoint("named");
            c.releaseSavepoint(named);
            c.commit();
            System.out.println("committed");
        }
    }
}
