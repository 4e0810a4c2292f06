-- Differential corpus of analyst queries over the hospital policy
-- (examples/policies/hospital.yaml), checked by TestRewrite_Corpus
-- (rewrite/corpus_test.go) against a real PostgreSQL: on data within the
-- policy's bounds and contribution limits, the emitted SQL with noise
-- disabled must return exactly what PostgreSQL returns for the query itself.
--
-- Format: queries are separated by blank lines; a block made only of "--"
-- lines (like this one) is a comment. Every query here must be accepted:
-- add refused shapes to the goldens (rewrite/testdata/*.txtar) instead.

-- # Every aggregate, ungrouped, over visits

SELECT COUNT(*) FROM visits

SELECT count(1) FROM visits

SELECT COUNT(cost) FROM visits

SELECT COUNT(age) FROM visits

SELECT COUNT(diagnosis) FROM visits

SELECT COUNT(visit_date) FROM visits

SELECT COUNT(department) FROM visits

SELECT COUNT(length_of_stay) FROM visits

SELECT COUNT(DISTINCT patient_id) FROM visits

SELECT SUM(cost) FROM visits

SELECT SUM(age) FROM visits

SELECT SUM(length_of_stay) FROM visits

SELECT AVG(cost) FROM visits

SELECT AVG(age) FROM visits

SELECT AVG(length_of_stay) FROM visits

SELECT VAR_POP(cost) FROM visits

SELECT VAR_SAMP(cost) FROM visits

SELECT VARIANCE(age) FROM visits

SELECT STDDEV(length_of_stay) FROM visits

SELECT STDDEV_POP(age) FROM visits

SELECT STDDEV_SAMP(cost) FROM visits

SELECT var_pop(length_of_stay), var_samp(length_of_stay) FROM visits

SELECT stddev_pop(cost), stddev_samp(cost), stddev(cost), variance(cost) FROM visits

SELECT COUNT(*), SUM(cost), AVG(cost), VAR_POP(cost), STDDEV(cost) FROM visits

SELECT COUNT(*), COUNT(DISTINCT patient_id), SUM(age), AVG(age), SUM(length_of_stay) FROM visits

SELECT SUM(cost), SUM(cost), AVG(cost) FROM visits

SELECT AVG(age), AVG(cost), AVG(length_of_stay) FROM visits

-- # Every aggregate, grouped by a public column of visits

SELECT department, COUNT(*) FROM visits GROUP BY department

SELECT department, COUNT(cost) FROM visits GROUP BY department

SELECT department, COUNT(diagnosis) FROM visits GROUP BY department

SELECT department, COUNT(DISTINCT patient_id) FROM visits GROUP BY department

SELECT department, SUM(cost) FROM visits GROUP BY department

SELECT department, SUM(age) FROM visits GROUP BY department

SELECT department, SUM(length_of_stay) FROM visits GROUP BY department

SELECT department, AVG(cost) FROM visits GROUP BY department

SELECT department, AVG(age) FROM visits GROUP BY department

SELECT department, AVG(length_of_stay) FROM visits GROUP BY department

SELECT department, VAR_POP(age) FROM visits GROUP BY department

SELECT department, VAR_SAMP(cost) FROM visits GROUP BY department

SELECT department, VARIANCE(length_of_stay) FROM visits GROUP BY department

SELECT department, STDDEV(age) FROM visits GROUP BY department

SELECT department, STDDEV_POP(cost) FROM visits GROUP BY department

SELECT department, STDDEV_SAMP(length_of_stay) FROM visits GROUP BY department

SELECT department, COUNT(*), AVG(cost) FROM visits GROUP BY department

SELECT department, COUNT(*), COUNT(cost), SUM(cost), AVG(cost), STDDEV(cost) FROM visits GROUP BY department

SELECT department, COUNT(DISTINCT patient_id), COUNT(*), AVG(length_of_stay) FROM visits GROUP BY department

SELECT COUNT(*), department FROM visits GROUP BY department

SELECT AVG(age), department, SUM(age) FROM visits GROUP BY department

SELECT COUNT(*) FROM visits GROUP BY department

SELECT SUM(cost), AVG(age) FROM visits GROUP BY department

-- # The patients table

SELECT COUNT(*) FROM patients

SELECT COUNT(birth_year), SUM(birth_year), AVG(birth_year) FROM patients

SELECT VAR_POP(birth_year), STDDEV_SAMP(birth_year) FROM patients

SELECT COUNT(DISTINCT patient_id) FROM patients

SELECT sex, COUNT(*) FROM patients GROUP BY sex

SELECT region, COUNT(*) FROM patients GROUP BY region

SELECT region, AVG(birth_year) FROM patients GROUP BY region

SELECT sex, SUM(birth_year), VARIANCE(birth_year) FROM patients GROUP BY sex

SELECT sex, region, COUNT(*) FROM patients GROUP BY sex, region

SELECT region, sex, AVG(birth_year), COUNT(*) FROM patients GROUP BY region, sex

SELECT region, sex, COUNT(*) FROM patients GROUP BY sex, region

SELECT sex, STDDEV(birth_year) FROM patients WHERE region = 'north' GROUP BY sex

SELECT region, COUNT(*) FROM patients WHERE birth_year >= 1980 GROUP BY region

SELECT region, COUNT(*) FROM patients WHERE sex = 'F' AND birth_year < 1950 GROUP BY region

SELECT COUNT(*) FROM patients WHERE region IN ('north', 'south') AND sex <> 'M'

SELECT width_bucket(birth_year, 1910, 2030, 12) AS decade, COUNT(*) FROM patients GROUP BY 1

SELECT sex, width_bucket(birth_year, 1900, 2000, 4), COUNT(*) FROM patients GROUP BY 1, 2

SELECT sex, SUM(birth_year) * 1.0 / COUNT(*) FROM patients GROUP BY sex

-- # WHERE: comparisons of each type

SELECT COUNT(*) FROM visits WHERE age > 40

SELECT COUNT(*) FROM visits WHERE age >= 18

SELECT COUNT(*) FROM visits WHERE age < 18

SELECT COUNT(*) FROM visits WHERE age <= 65

SELECT COUNT(*) FROM visits WHERE age = 50

SELECT COUNT(*) FROM visits WHERE age <> 50

SELECT COUNT(*) FROM visits WHERE age != 50

SELECT COUNT(*) FROM visits WHERE 18 <= age

SELECT SUM(cost) FROM visits WHERE cost > 5000.5

SELECT SUM(cost) FROM visits WHERE cost < 1e4

SELECT AVG(cost) FROM visits WHERE cost >= 0.01 AND cost <= 19999.99

SELECT COUNT(*) FROM visits WHERE visit_date >= '2022-01-01'

SELECT COUNT(*) FROM visits WHERE visit_date < DATE '2021-07-01'

SELECT COUNT(*) FROM visits WHERE visit_date = '2023-03-15'

SELECT COUNT(*) FROM visits WHERE visit_date > '2024-06-30'::date

SELECT COUNT(*) FROM visits WHERE visit_date <= CAST('2020-12-31' AS date)

SELECT COUNT(*) FROM visits WHERE department = 'oncology'

SELECT COUNT(*) FROM visits WHERE department <> 'surgery'

SELECT COUNT(*) FROM visits WHERE diagnosis = 'flu'

SELECT COUNT(*) FROM visits WHERE diagnosis = 'J45'

SELECT COUNT(*) FROM visits WHERE diagnosis > 'J'

SELECT COUNT(*) FROM visits WHERE length_of_stay = 0

SELECT AVG(length_of_stay) FROM visits WHERE length_of_stay > 0

SELECT COUNT(*) FROM visits WHERE patient_id > 100

SELECT COUNT(*) FROM visits WHERE patient_id <= 50 OR patient_id > 350

SELECT SUM(age) FROM visits WHERE age > -1 AND cost >= -(5)

SELECT COUNT(*) FROM visits WHERE cost > -0.5

SELECT COUNT(*) FROM visits WHERE age > 30.5

-- # WHERE: BETWEEN, IN, LIKE, NULL tests

SELECT COUNT(*) FROM visits WHERE age BETWEEN 18 AND 65

SELECT COUNT(*) FROM visits WHERE age NOT BETWEEN 18 AND 65

SELECT COUNT(*) FROM visits WHERE visit_date BETWEEN '2021-01-01' AND '2021-12-31'

SELECT SUM(cost) FROM visits WHERE cost BETWEEN 100 AND 900.75

SELECT COUNT(*) FROM visits WHERE department IN ('surgery', 'oncology')

SELECT COUNT(*) FROM visits WHERE department NOT IN ('surgery', 'oncology', 'pediatrics')

SELECT COUNT(*) FROM visits WHERE age IN (20, 30, 40, 50)

SELECT COUNT(*) FROM visits WHERE age NOT IN (1, 2, 3)

SELECT COUNT(*) FROM visits WHERE diagnosis IN ('flu', 'J10', 'J45')

SELECT COUNT(*) FROM visits WHERE visit_date IN ('2022-02-02', '2023-03-03')

SELECT COUNT(*) FROM visits WHERE diagnosis LIKE 'J%'

SELECT COUNT(*) FROM visits WHERE diagnosis NOT LIKE 'J%'

SELECT COUNT(*) FROM visits WHERE diagnosis LIKE '_1_'

SELECT COUNT(*) FROM visits WHERE diagnosis ILIKE 'onc%'

SELECT COUNT(*) FROM visits WHERE diagnosis NOT ILIKE '%U'

SELECT COUNT(*) FROM visits WHERE department LIKE '%ology'

SELECT COUNT(*) FROM visits WHERE diagnosis NOT ILIKE E'a\\%'

SELECT COUNT(*) FROM visits WHERE diagnosis IS NULL

SELECT COUNT(*) FROM visits WHERE diagnosis IS NOT NULL

SELECT COUNT(*), SUM(age) FROM visits WHERE cost IS NULL

SELECT AVG(cost) FROM visits WHERE cost IS NOT NULL

SELECT COUNT(*) FROM visits WHERE age ISNULL

SELECT COUNT(*) FROM visits WHERE age NOTNULL

SELECT COUNT(*) FROM visits WHERE diagnosis IS NOT NULL AND cost IS NULL OR age NOTNULL

-- # WHERE: boolean structure and constants

SELECT COUNT(*) FROM visits WHERE age > 18 AND age < 65

SELECT COUNT(*) FROM visits WHERE age < 18 OR age > 65

SELECT COUNT(*) FROM visits WHERE NOT age > 40

SELECT COUNT(*) FROM visits WHERE NOT (age < 18 OR age > 65) AND (department = 'surgery' OR department = 'oncology')

SELECT COUNT(*) FROM visits WHERE (age > 10 AND (cost > 100 OR length_of_stay > 3)) OR diagnosis = 'flu'

SELECT COUNT(*) FROM visits WHERE NOT (NOT (age >= 50))

SELECT COUNT(*) FROM visits WHERE ((((age > 20))))

SELECT COUNT(*) FROM visits WHERE 1 = 1 AND TRUE

SELECT COUNT(*) FROM visits WHERE FALSE

SELECT COUNT(*) FROM visits WHERE 1 = 2 OR age = 33

SELECT COUNT(*), SUM(cost), AVG(cost) FROM visits WHERE age > 200

SELECT department, COUNT(*) FROM visits WHERE age > 200 GROUP BY department

SELECT COUNT(*) FROM visits WHERE age > 30 AND age > 40 AND age > 50

SELECT COUNT(*) FROM visits WHERE department = 'oncology' AND visit_date >= '2023-01-01' AND cost > 1000 AND diagnosis IS NOT NULL

-- # WHERE: PostgreSQL spellings

SELECT COUNT(*) FROM visits WHERE diagnosis IS DISTINCT FROM 'flu'

SELECT COUNT(*) FROM visits WHERE diagnosis IS NOT DISTINCT FROM 'flu'

SELECT COUNT(*) FROM visits WHERE age IS NOT DISTINCT FROM 40

SELECT COUNT(*) FROM visits WHERE cost IS DISTINCT FROM 0 AND age IS DISTINCT FROM 40

SELECT COUNT(*) FROM visits WHERE diagnosis = E'it\'s'

SELECT COUNT(*) FROM visits WHERE diagnosis = 'it''s'

SELECT COUNT(*) FROM visits WHERE diagnosis = $$it's$$

SELECT COUNT(*) FROM visits WHERE diagnosis = $q$a$$b$q$

SELECT COUNT(*) FROM visits WHERE diagnosis = E'a\\%x'

SELECT COUNT(*) FROM visits WHERE age > '40'

SELECT COUNT(*) FROM visits WHERE age > 40::int

SELECT COUNT(*) FROM visits WHERE cost > 10::numeric AND cost < CAST('20000' AS numeric)

SELECT COUNT(*) FROM visits WHERE cost > 1.5::double precision

SELECT COUNT(*) FROM visits WHERE visit_date >= date '2022-01-01'

SELECT COUNT(*) FROM visits WHERE visit_date BETWEEN '2021-01-01' AND DATE '2021-12-31' AND age NOT BETWEEN 0 AND 17 AND cost BETWEEN 10::numeric AND CAST('20.5' AS numeric)

SELECT COUNT(*) FROM visits WHERE age >= 18 AND 110 > age AND cost <> 0.5 AND cost != 1e3 AND department = 'oncology' AND visit_date < '2023-01-01'

-- # GROUP BY forms

SELECT department, COUNT(*) FROM visits GROUP BY 1

SELECT department AS dept, COUNT(*) FROM visits GROUP BY dept

SELECT department dept, AVG(age) FROM visits GROUP BY dept

SELECT department, COUNT(*) FROM visits GROUP BY visits.department

SELECT v.department, COUNT(*) FROM visits v GROUP BY v.department

SELECT department, COUNT(*) FROM visits WHERE visit_date >= '2022-06-01' GROUP BY department

SELECT width_bucket(age, 0, 100, 10) AS age_band, COUNT(*) FROM visits GROUP BY age_band

SELECT width_bucket(age, 0, 110, 11), COUNT(*), AVG(cost) FROM visits GROUP BY 1

SELECT width_bucket(age, 20, 60, 4), COUNT(*) FROM visits GROUP BY width_bucket(age, 20, 60, 4)

SELECT width_bucket(cost, 0, 20000, 5), COUNT(*), SUM(cost) FROM visits GROUP BY 1

SELECT width_bucket(cost, -0.5, 19999.5, 4), AVG(age) FROM visits GROUP BY 1

SELECT width_bucket(length_of_stay, 0, 60, 6), COUNT(*) FROM visits GROUP BY 1

SELECT department, width_bucket(age, 0, 100, 2), COUNT(*) FROM visits GROUP BY 1, 2

SELECT date_trunc('month', visit_date), COUNT(*) FROM visits GROUP BY 1

SELECT date_trunc('year', visit_date) AS y, COUNT(*), AVG(cost) FROM visits GROUP BY y

SELECT date_trunc('YEAR', visit_date), SUM(length_of_stay) FROM visits GROUP BY date_trunc('YEAR', visit_date)

SELECT date_trunc('month', visit_date) AS m, COUNT(DISTINCT patient_id) FROM visits WHERE visit_date >= '2024-01-01' GROUP BY m

SELECT department, date_trunc('year', visit_date), COUNT(*) FROM visits GROUP BY 1, 2

SELECT EXTRACT(YEAR FROM visit_date), COUNT(*) FROM visits GROUP BY 1

SELECT extract(year from visit_date) AS y, COUNT(*), stddev_samp(age) FROM visits GROUP BY y

SELECT EXTRACT(YEAR FROM visit_date) AS yr, SUM(cost) FROM visits GROUP BY EXTRACT(YEAR FROM visit_date)

SELECT department, EXTRACT(YEAR FROM visit_date), COUNT(DISTINCT patient_id) FROM visits GROUP BY department, EXTRACT(YEAR FROM visit_date)

SELECT EXTRACT(YEAR FROM visit_date), department, AVG(age) FROM visits GROUP BY 2, 1

SELECT COUNT(*) FROM visits WHERE age IS NOT NULL GROUP BY width_bucket(age, 0, 100, 5)

SELECT COUNT(*), AVG(cost) FROM visits GROUP BY department, EXTRACT(YEAR FROM visit_date)

-- # HAVING

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) > 10

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) >= 80

SELECT department, AVG(cost) FROM visits GROUP BY department HAVING AVG(cost) > 9000

SELECT department, SUM(cost) FROM visits GROUP BY department HAVING SUM(cost) < 1000000

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING AVG(age) > 50

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) > 50 AND AVG(age) < 60

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) < 70 OR SUM(length_of_stay) > 2000

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING NOT COUNT(*) > 90

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING (AVG(cost) >= 10000 AND NOT SUM(age) < 4000) OR COUNT(DISTINCT patient_id) * 1.0 / COUNT(*) > 0.5

SELECT department, COUNT(*) AS n FROM visits GROUP BY department HAVING COUNT(*) <> 0

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING SUM(cost) / COUNT(*) > 9500

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) * 2 > 150

SELECT region, COUNT(*) FROM patients GROUP BY region HAVING COUNT(*) > 60

SELECT region, AVG(birth_year) FROM patients GROUP BY region HAVING STDDEV(birth_year) > 30

SELECT width_bucket(age, 0, 100, 10), COUNT(*) FROM visits GROUP BY 1 HAVING COUNT(*) >= 100

SELECT department, EXTRACT(YEAR FROM visit_date), COUNT(DISTINCT patient_id) FROM visits GROUP BY department, EXTRACT(YEAR FROM visit_date) HAVING COUNT(DISTINCT patient_id) >= 15

SELECT COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) > 75

-- # ORDER BY, LIMIT, OFFSET

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department DESC

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY 2 DESC

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY COUNT(*)

SELECT department, COUNT(*) AS n FROM visits GROUP BY department ORDER BY n DESC, department

SELECT department, SUM(cost) total FROM visits GROUP BY department ORDER BY total DESC LIMIT 2

SELECT department, SUM(length_of_stay) FROM visits GROUP BY 1 ORDER BY SUM(length_of_stay) DESC, 1 LIMIT 3 OFFSET 1

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY 2 DESC OFFSET 2 ROWS LIMIT 3

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department OFFSET 5

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department LIMIT 3

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department LIMIT 0

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department LIMIT 100

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department LIMIT ALL

SELECT department, COUNT(*) FROM visits GROUP BY department ORDER BY department ASC LIMIT 2 OFFSET 2

SELECT department, AVG(age) AS mean_age FROM visits GROUP BY department ORDER BY mean_age

SELECT department AS dept, AVG(age) AS mean_age FROM visits GROUP BY dept ORDER BY mean_age DESC LIMIT 1

SELECT sex, region, COUNT(*) FROM patients GROUP BY sex, region ORDER BY region, sex DESC

SELECT sex, region, COUNT(*) FROM patients GROUP BY sex, region ORDER BY 3 DESC, 1, 2 LIMIT 4

SELECT width_bucket(age, 0, 100, 10) AS band, COUNT(*) FROM visits GROUP BY band ORDER BY band

SELECT date_trunc('year', visit_date) AS y, COUNT(*) FROM visits GROUP BY 1 ORDER BY y DESC

SELECT EXTRACT(YEAR FROM visit_date) AS y, AVG(cost) FROM visits GROUP BY 1 ORDER BY 2 LIMIT 2

SELECT department, COUNT(*) FROM visits GROUP BY department HAVING COUNT(*) > 60 ORDER BY 2 DESC LIMIT 3

SELECT COUNT(*) FROM visits LIMIT 1

SELECT COUNT(*) FROM visits LIMIT ALL

SELECT COUNT(*) FROM visits OFFSET 0

-- # Aliases and output names

SELECT COUNT(*) AS n FROM visits

SELECT COUNT(*) n, SUM(cost) s FROM visits

SELECT count(distinct visits.patient_id) AS patients, count(*) FROM visits WHERE age >= 18

SELECT department AS "Dept", COUNT(*) AS "Visits" FROM visits GROUP BY 1

SELECT department AS d, COUNT(*) AS c, AVG(cost) AS a FROM visits GROUP BY d ORDER BY c

SELECT COUNT(*) AS "count of rows" FROM visits

-- # Arithmetic over aggregates

SELECT SUM(cost) / COUNT(*) FROM visits

SELECT department, SUM(cost) / COUNT(*) AS per_visit, COUNT(*) * 2, COUNT(*), -SUM(cost) + 1.5 FROM visits GROUP BY department

SELECT department, SUM(cost) / COUNT(cost) FROM visits GROUP BY department

SELECT COUNT(*) + 1 FROM visits

SELECT COUNT(*) - COUNT(cost) FROM visits

SELECT COUNT(*) * 100 FROM visits

SELECT COUNT(cost) * 1.0 / COUNT(*) FROM visits

SELECT department, COUNT(DISTINCT patient_id) * 1.0 / COUNT(*) AS share FROM visits GROUP BY department

SELECT department, AVG(cost) - AVG(age) FROM visits GROUP BY department

SELECT department, (SUM(cost) + SUM(age)) / (COUNT(*) + 1) FROM visits GROUP BY department

SELECT AVG(cost) * 2, AVG(cost) / 2, -AVG(cost) FROM visits

SELECT SUM(length_of_stay) * 1.0 / COUNT(DISTINCT patient_id) FROM visits

SELECT STDDEV(cost) / AVG(cost) AS cv FROM visits

SELECT department, SUM(cost) / 1000 FROM visits GROUP BY department ORDER BY 2 DESC

SELECT department, SUM(age) - 2 * SUM(length_of_stay) FROM visits GROUP BY department

SELECT sex, AVG(birth_year) - 1900 FROM patients GROUP BY sex

SELECT SUM(cost) / 0.5 FROM visits

SELECT COUNT(*) - 10 * 2 FROM visits

-- # Names: case folding, quoting, qualification

select department, count(*) from visits group by department

SELECT Department, Count(*) FROM Visits GROUP BY Department

SELECT DEPARTMENT, AVG(COST) FROM VISITS GROUP BY DEPARTMENT

SELECT "department", COUNT("cost") FROM "visits" GROUP BY "department"

SELECT "department", COUNT(*) FROM public."visits" GROUP BY 1

SELECT department, COUNT(*) FROM public.visits GROUP BY department

SELECT v.department, AVG(v.cost) FROM public.visits AS v GROUP BY v.department

SELECT visits.department, SUM(visits.age) FROM visits GROUP BY visits.department

SELECT COUNT(*) FROM visits AS x WHERE x.age > 20

SELECT COUNT(*) FROM visits v WHERE v.department = 'oncology' AND v.age IS NOT NULL

SELECT COUNT(*) FROM visits WHERE visits.diagnosis IS DISTINCT FROM 'flu'

SELECT p.region, COUNT(*) FROM patients p GROUP BY p.region

SELECT COUNT(*) FROM Patients WHERE Sex = 'F'

-- # Comments and layout

SELECT COUNT(*) -- a trailing comment
FROM visits

SELECT /* a block comment */ COUNT(*) FROM visits

SELECT COUNT(*) /* outer /* inner */ still comment */ FROM visits WHERE diagnosis = $$it's$$ OR diagnosis = E'it\'s' OR diagnosis = $q$a$$b$q$

-- a leading comment line
SELECT department, COUNT(*)
  FROM visits
 WHERE age > 20
 GROUP BY department
 ORDER BY 2 DESC

SELECT department,
       COUNT(*),        -- visits
       AVG(cost)        /* mean cost */
  FROM visits
 GROUP BY department

	SELECT	COUNT(*)	FROM	visits	WHERE	age	>	5

SELECT department , count ( * ) FROM visits GROUP BY department

SELECT COUNT(*)FROM visits WHERE(age>20)AND(cost<5000)

-- # Mixed shapes

SELECT department, COUNT(*), AVG(cost), STDDEV(age) FROM visits WHERE visit_date >= '2023-01-01' AND diagnosis LIKE 'J%' GROUP BY department HAVING COUNT(*) > 5 ORDER BY 2 DESC LIMIT 5

SELECT region, sex, COUNT(*), AVG(birth_year) FROM patients WHERE birth_year BETWEEN 1940 AND 2000 GROUP BY region, sex HAVING COUNT(*) > 5 ORDER BY region, sex

SELECT width_bucket(age, 0, 100, 4) AS q, department, COUNT(*) FROM visits WHERE cost IS NOT NULL GROUP BY 1, 2 ORDER BY 1, 2 LIMIT 10

SELECT EXTRACT(YEAR FROM visit_date) AS y, COUNT(DISTINCT patient_id) AS patients, SUM(cost) / COUNT(*) AS per_visit FROM visits GROUP BY 1 ORDER BY 1

SELECT date_trunc('month', visit_date) AS m, COUNT(*) FROM visits WHERE department = 'emergency' AND visit_date < '2021-01-01' GROUP BY 1 ORDER BY 1

SELECT department, VAR_SAMP(cost), VAR_POP(cost), COUNT(cost) FROM visits WHERE age IS NOT NULL GROUP BY department ORDER BY 1

SELECT department, COUNT(*) FROM visits WHERE department IN ('oncology', 'surgery') GROUP BY department

SELECT department, AVG(length_of_stay) FROM visits WHERE length_of_stay BETWEEN 1 AND 30 GROUP BY department ORDER BY 2 DESC OFFSET 1

SELECT sex, COUNT(*) * 1.0 / 2 FROM patients GROUP BY sex ORDER BY 1

SELECT COUNT(DISTINCT patient_id), AVG(age) FROM visits WHERE department = 'pediatrics' AND age < 18

-- # Joins of the two protected tables on the unit column

SELECT COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id

SELECT p.sex, COUNT(*) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.sex

SELECT p.region, AVG(v.cost) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.region

SELECT v.department, p.sex, COUNT(*) FROM visits v JOIN patients p USING (patient_id) GROUP BY v.department, p.sex

SELECT COUNT(*), SUM(v.length_of_stay) FROM visits v JOIN patients p ON p.patient_id = v.patient_id WHERE p.birth_year < 1960

SELECT p.sex, COUNT(DISTINCT v.patient_id) FROM visits v JOIN patients p ON v.patient_id = p.patient_id WHERE v.department = 'oncology' GROUP BY 1

SELECT p.region, COUNT(*) FROM patients p LEFT JOIN visits v ON v.patient_id = p.patient_id GROUP BY p.region ORDER BY 2 DESC

-- # Expressions inside aggregates and FILTER

SELECT SUM(CASE WHEN age >= 65 THEN 1 ELSE 0 END) FROM visits

SELECT department, SUM(CASE WHEN cost > 10000 THEN 1 ELSE 0 END) AS expensive FROM visits GROUP BY department

SELECT SUM(cost * 2) FROM visits

SELECT AVG(cost + age) FROM visits

SELECT department, AVG(cost / 100) FROM visits GROUP BY department

SELECT SUM(-age) FROM visits

SELECT SUM(age - length_of_stay) FROM visits

SELECT AVG(COALESCE(cost, 0)) FROM visits

SELECT SUM(LEAST(cost, 5000)) FROM visits

SELECT SUM(GREATEST(age, 18)) FROM visits

SELECT AVG(ABS(age - 50)) FROM visits

SELECT SUM(cost / NULLIF(length_of_stay, 0)) FROM visits

SELECT AVG(CASE WHEN department = 'oncology' THEN cost END) FROM visits

SELECT COUNT(*) FILTER (WHERE age > 3) FROM visits

SELECT department, COUNT(*) FILTER (WHERE age < 18), COUNT(*) FROM visits GROUP BY department

SELECT SUM(cost) FILTER (WHERE department = 'surgery') FROM visits

SELECT AVG(age) FILTER (WHERE cost IS NOT NULL) FROM visits

SELECT department, COUNT(cost) FILTER (WHERE visit_date >= '2023-01-01') FROM visits GROUP BY 1

SELECT VAR_POP(age * 1.5) FROM visits

SELECT STDDEV(cost) FILTER (WHERE age > 30) FROM visits

SELECT department, SUM(age * length_of_stay) FROM visits GROUP BY department

SELECT SUM(CASE WHEN age < 18 THEN cost ELSE 0 END) * 1.0 / SUM(cost) FROM visits

-- # GROUP BY a column without public values (partition selection; with
-- # noise off every non-NULL group is released, as PostgreSQL returns it)

SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis

SELECT diagnosis, COUNT(DISTINCT patient_id), AVG(cost) FROM visits GROUP BY 1

SELECT department, diagnosis, SUM(length_of_stay) FROM visits WHERE age > 20 GROUP BY department, diagnosis

SELECT diagnosis, COUNT(*) FROM visits GROUP BY diagnosis HAVING COUNT(*) > 20 ORDER BY 2 DESC LIMIT 3

-- # Sample-and-aggregate (corr, covariances, regressions), checked block by
-- # block: the analyst's query run on each block's units, clipped, averaged
-- # (diffSampleAgg in rewrite/sampleagg_group_test.go)

SELECT corr(cost, age) FROM visits

SELECT department, corr(cost, age) FROM visits GROUP BY department

SELECT department, regr_r2(cost, length_of_stay), corr(cost, age) FROM visits WHERE age >= 18 GROUP BY department

SELECT department, covar_pop(cost, age), regr_slope(cost, age), AVG(cost) FROM visits WHERE age >= 18 GROUP BY department

SELECT CASE WHEN age < 50 THEN 'under 50' ELSE '50 and over' END AS band, corr(length_of_stay, age) FROM visits GROUP BY band

SELECT p.sex, corr(v.cost, v.age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.sex

SELECT p.region, v.department, covar_samp(v.length_of_stay, v.age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.region, v.department

-- Quantiles over joins on the unit and with private keys (issue 9,
-- join_quantile.go); TestRewrite_Corpus compares their histograms with
-- PostgreSQL's own value.
SELECT MIN(v.age) FROM visits v JOIN patients p USING (patient_id)

SELECT p.region, percentile_cont(0.5) WITHIN GROUP (ORDER BY v.cost) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY p.region

SELECT p.sex, MAX(v.length_of_stay), MIN(p.birth_year) FROM patients p JOIN visits v USING (patient_id) GROUP BY p.sex

SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY p.birth_year) FROM visits v JOIN patients p USING (patient_id) WHERE v.department = 'oncology'

SELECT v.department, percentile_disc(0.9) WITHIN GROUP (ORDER BY v.visit_date) FROM visits v LEFT JOIN patients p ON v.patient_id = p.patient_id WHERE p.sex = 'F' GROUP BY v.department

SELECT p.region, v.department, MAX(v.cost), COUNT(*) FROM visits v JOIN patients p ON p.patient_id = v.patient_id GROUP BY p.region, v.department

SELECT diagnosis, percentile_disc(0.5) WITHIN GROUP (ORDER BY age) FROM visits GROUP BY diagnosis

SELECT diagnosis, MIN(visit_date), MAX(visit_date) FROM visits GROUP BY diagnosis

SELECT department, diagnosis, percentile_cont(0.9) WITHIN GROUP (ORDER BY cost) FROM visits GROUP BY department, diagnosis

SELECT diagnosis, MIN(age) FILTER (WHERE cost > 100), COUNT(*) FROM visits GROUP BY diagnosis

SELECT v.diagnosis, COUNT(*), percentile_cont(0.5) WITHIN GROUP (ORDER BY p.birth_year) FROM visits v JOIN patients p USING (patient_id) GROUP BY v.diagnosis

SELECT p.birth_year, COUNT(*) FROM visits v JOIN patients p USING (patient_id) WHERE p.birth_year > 2000 GROUP BY p.birth_year

SELECT v.diagnosis, p.region, COUNT(*), MAX(v.age) FROM visits v JOIN patients p ON v.patient_id = p.patient_id GROUP BY v.diagnosis, p.region

SELECT p.region, v.diagnosis, SUM(v.cost) FROM patients p JOIN visits v USING (patient_id) WHERE v.age >= 18 GROUP BY p.region, v.diagnosis

-- # Quantiles of expressions (quantile_expr.go): compared with
-- # PostgreSQL's own answer up to a bucket of the grid (checkQuantileRows)

SELECT percentile_cont(0.5) WITHIN GROUP (ORDER BY cost / NULLIF(age, 0)) FROM visits

SELECT MAX(cost * 2 + 1) FROM visits

SELECT department, MIN(age - length_of_stay), percentile_disc(0.75) WITHIN GROUP (ORDER BY length_of_stay * 2) FROM visits GROUP BY department

SELECT percentile_cont(0.25) WITHIN GROUP (ORDER BY cost * 1.1 + 5) FROM visits WHERE age >= 18

SELECT MIN(CASE WHEN age >= 65 THEN cost ELSE cost / 2 END) FROM visits

SELECT percentile_disc(0.5) WITHIN GROUP (ORDER BY GREATEST(age, 18) - 18), COUNT(*) FROM visits

-- # Relative dates (rewrite/reldate.go), folded at the statement's start

SELECT COUNT(*) FROM visits WHERE visit_date >= now() - interval '2 years'

SELECT department, COUNT(*) FROM visits WHERE visit_date >= current_date - 730 AND visit_date < date_trunc('year', now()) - interval '1 month' GROUP BY department

SELECT COUNT(*) FROM visits WHERE visit_date >= CAST((now() + INTERVAL '-800 day') AS date)

-- # AT TIME ZONE the session's zone (rewrite/attz.go), as Cube writes it

SELECT date_trunc('month', ("visits".visit_date::timestamptz AT TIME ZONE 'UTC')) "visits__visit_date_month", count(*) "visits__count" FROM public.visits AS "visits" WHERE ("visits".visit_date::timestamptz AT TIME ZONE 'UTC' >= '2023-01-01T00:00:00.000'::timestamptz AND "visits".visit_date::timestamptz AT TIME ZONE 'UTC' <= '2023-06-30T23:59:59.999'::timestamptz) GROUP BY 1 ORDER BY 1 ASC LIMIT 10000

SELECT date_trunc('quarter', visit_date AT TIME ZONE 'UTC'), COUNT(*) FROM visits GROUP BY 1

-- # Integer arithmetic over date fields as keys (rewrite/arithkey.go)

SELECT ((CAST(extract(isodow from "public"."visits"."visit_date") AS integer) % 7) + 1) AS "visit_date", count(*) AS "count" FROM "public"."visits" GROUP BY ((CAST(extract(isodow from "public"."visits"."visit_date") AS integer) % 7) + 1) ORDER BY ((CAST(extract(isodow from "public"."visits"."visit_date") AS integer) % 7) + 1) ASC

SELECT (extract(isodow from visit_date) - 8) % 3, SUM(cost) FROM visits GROUP BY 1

SELECT 10 + date_part('dow', visit_date), COUNT(*) FROM visits GROUP BY 1
