"""Code that computes a near neighbour of what the question asks (agent/feedback/slips.py):
the lines the model reads after the step, from the question's words and the step's code."""

from __future__ import annotations

import pytest

from kernel_analyst.agent.feedback.slips import (
    mended_population_std,
    mended_statistic_first,
    recomputed_columns,
    slips_in,
)
from tests.dseval_problems import reference_cells, set_columns

POPULATION = ("Calculate the mean and standard deviation of the fare. Calculate the arithmetic mean and "
              "population standard deviation (σ).")  # DABench easy 129
RMSE = "Evaluate the model with the Root Mean Square Error (RMSE) evaluation metric only."  # hard 30
SAMPLE = "Report the sample standard deviation of the ages."
IQR = ("Calculate the mean and standard deviation of the \"Mar.2019\" column. Outliers are to be pruned "
       "via the interquartile range method before calculating the mean and standard deviation.")  # easy 18
AGES = ("Create a new column called \"AgeGroup\" that categorizes the passengers into four age groups: "
        "'Child' (0-12 years old), 'Teenager' (13-19 years old), 'Adult' (20-59 years old), and 'Elderly' "
        "(60 years old and above).")  # DABench medium 6


@pytest.mark.parametrize(("question", "code", "says"), [
    (POPULATION, "print(round(df['Fare'].std(), 2))", "`.std(ddof=0)`"),
    (POPULATION, "df.groupby('Pclass')['Fare'].agg(['mean', 'median', 'std'])", "`.std(ddof=0)`"),
    (POPULATION, "import statistics\nprint(statistics.stdev(df.Fare))", "`.std(ddof=0)`"),
    (RMSE, "mse = mean_squared_error(y_test, pred)\nprint(round(mse, 2))", "np.sqrt(mean_squared_error"),
    (SAMPLE, "print(np.std(df.age))", "ddof=1"),
    # DABench hard 7 on 7ddff9d: the one-hot columns dropped by the numeric selection (0.71 for 0.78)
    ("Use one-hot encoding for 'Sex' and 'Embarked', then fit the model.",
     "df = pd.get_dummies(df, columns=['Sex', 'Embarked'])\n"
     "X = df.select_dtypes('number').drop('Survived', axis=1)",
     "`select_dtypes(['number', 'bool'])`"),
    # the conversation benchmark's mpg with the 1.5B model, twice: the best three for "the worst"
    ("Which 3 cars have the worst mpg? Give their names.", "print(df.nlargest(3, 'mpg')['name'])",
     "Take the smallest (`nsmallest`"),
    ("Which 3 cars have the lowest mpg?", "print(df.sort_values('mpg', ascending=False).head(3))",
     "Take the smallest (`nsmallest`"),
    ("Which 3 cars have the highest mpg?", "print(df.sort_values('mpg').head(3)['name'])",
     "Take the largest (`nlargest`"),
    ("Which country has the highest GDP?", "print(df.loc[df['GDP'].idxmin(), 'Country'])",
     "Take the largest (`nlargest`"),
    # the model's own cell on easy 18: the lower bound alone
    (IQR, "df = df[df['Mar.2019'] > df['Mar.2019'].quantile(0.25) - 1.5 * (df['Mar.2019'].quantile(0.75) "
          "- df['Mar.2019'].quantile(0.25))]\nprint(df['Mar.2019'].mean())", "Q3 + 1.5 * IQR above"),
    (IQR, "upper = q3 + iqr * 1.5\nclean = df[df.x <= upper]", "only one of them"),
    # the model's own cell on medium 6: the last group is (59, 60]
    (AGES, "df['AgeGroup'] = pd.cut(df['Age'], bins=[0, 12, 19, 59, 60], labels=['Child', 'Teenager', "
           "'Adult', 'Elderly'])", "float('inf')"),
    # DABench easy 33: the two-sample test, and its statistic taken as the p-value
    ("Use the Kolmogorov-Smirnov test to assess the normality of the \"row m/z\" column.",
     "print(ks_2samp(row_mz, 'norm'))", "`scipy.stats.kstest(x, 'norm'"),
    ("Is the difference significant?", "p_value, t = stats.ttest_ind(a, b)", "statistic first"),
    # DABench easy 18 on this sitting's tree: pruning done by capping
    (IQR, "df['Mar.2019'] = df['Mar.2019'].clip(lower=q1 - 1.5 * iqr, upper=q3 + 1.5 * iqr)",
     "between(low, high)"),
    # the conversation benchmark's brussels-hotels, the 1.5B model's own cell
    ("In which month of the year is the occupancy rate highest on average?",
     "grouped = df.groupby('Date')['Occupancy rate'].mean()\nprint(grouped.idxmax().strftime('%B'))",
     ".dt.month"),
    ("At which hour are most rides picked up?", "print(df['pickup'].value_counts().idxmax())", ".dt.hour"),
    ("Group the cars by weight: light (under 2500), medium, heavy (4000+).",
     "df['w'] = pd.cut(df.weight, [0, 2500, 4000, 5000])", "no group (NaN)"),
    # DABench hard 28 with the 1.5B model: every mean 0.0000
    ("Normalize 'age', 'bmi', 'children', and 'charges' columns. Report the mean of each column.",
     "scaler = StandardScaler()\ndf[cols] = scaler.fit_transform(df[cols])", "`MinMaxScaler`"),
    ("Normalize the Fare column.", "df['Fare'] = (df['Fare'] - df['Fare'].mean()) / df['Fare'].std()",
     "(x - x.min()) / (x.max() - x.min())"),
    # DSEval employee-dataset with the 1.5B model, its own cell
    ("Encode the categorical columns using label encoding. Save the result in-place.",
     "employee = pd.get_dummies(employee)", "LabelEncoder().fit_transform"),
])
def test_a_slip_is_named_with_what_to_use(question: str, code: str, says: str) -> None:
    found = slips_in(question, code)
    assert len(found) == 1 and found[0].key == "slip" and says in found[0].text, found


@pytest.mark.parametrize(("question", "code"), [
    (POPULATION, "print(df['Fare'].std(ddof=0))"),
    (POPULATION, "print(np.std(df['Fare']))"),  # numpy divides by n already
    (POPULATION, "import statistics\nprint(statistics.pstdev(df.Fare))"),
    (RMSE, "print(np.sqrt(mean_squared_error(y_test, pred)))"),
    (RMSE, "print(mean_squared_error(y_test, pred) ** 0.5)"),
    (RMSE, "print(root_mean_squared_error(y_test, pred))"),
    (SAMPLE, "print(df.age.std())"),
    # DABench 722: "the population standard deviation formula, not the sample standard deviation"
    ("Use the population standard deviation formula, not the sample standard deviation formula.",
     "print(np.std(df.hp))"),
    ("What is the standard deviation of the fare?", "print(df.Fare.std())"),  # not asked: no slip
    ("What is the mean squared error?", "print(mean_squared_error(y, p))"),
    (IQR, "lower = q1 - 1.5 * iqr\nupper = q3 + 1.5 * iqr\nclean = df[(df.x >= lower) & (df.x <= upper)]"),
    (IQR, "clean = df[~((df.x < (Q1 - 1.5 * IQR)) | (df.x > (Q3 + 1.5 * IQR)))]"),
    (IQR, "clean = df[df.x.between(q1 - 1.5 * iqr, q3 + 1.5*iqr)]"),
    (IQR, "q1, q3 = df.x.quantile([0.25, 0.75])\nprint(q3 - q1)"),  # no bound yet
    (AGES, "df['AgeGroup'] = pd.cut(df['Age'], bins=[0, 12, 19, 59, np.inf], labels=labels)"),
    ("Is the difference significant?", "t, p_value = stats.ttest_ind(a, b)"),
    ("In which month is the occupancy highest on average?",
     "m = pd.to_datetime(df['Date'], format='%d-%m-%y').dt.month\n"
     "print(df.groupby(m)['Occupancy rate'].mean())"),
    ("On which date was the occupancy highest?",
     "print(df.groupby('Date')['Occupancy rate'].mean().idxmax())"),
    ("At which hour are most rides picked up?", "print(df['hour'].value_counts().idxmax())"),
    ("Is it normal?", "stat, p = shapiro(x)\npval = p"),
    ("Cap the outliers of the fare at the IQR bounds, then give its mean.", "df.Fare.clip(lo, hi).mean()"),
    ("Perform a two-sample Kolmogorov-Smirnov test to compare the distributions.", "print(ks_2samp(a, b))"),
    (AGES, "df['AgeGroup'] = pd.cut(df['Age'], bins=[0, 12, 19, 59, df['Age'].max()], labels=labels)"),
    (AGES, "df['AgeGroup'] = pd.cut(df['Age'], bins=[0, 12, 19, 59, float('inf')], labels=labels)"),
    ("Split the ages into four groups: 0-12, 13-19, 20-59, 60-80.",
     "df['g'] = pd.cut(df.Age, [0, 12, 19, 59, 80])"),  # closed groups: no slip
    ("Count the outliers above the upper fence only, by the IQR rule.",
     "print((df.x > q3 + 1.5 * iqr).sum())"),
    ("Normalize the Fare column using Min-Max scaling.",
     "df['Fare'] = MinMaxScaler().fit_transform(df[['Fare']])"),
    ("Normalize (standardize) the income: zero mean and unit variance.",
     "x = StandardScaler().fit_transform(x)"),
    ("Is the Fare column normally distributed?", "print(stats.zscore(df.Fare).max())"),
    # DSEval diabetes-prediction-dataset
    ("Normalize the \"age\" and \"bmi\" columns using standard scalers. Save the normalized dataset "
     "in-place.",
     "df[['age', 'bmi']] = StandardScaler().fit_transform(df[['age', 'bmi']])"),
    ("Encode the categorical columns using label encoding. Save the result in-place.",
     "for c in cols:\n    employee[c] = LabelEncoder().fit_transform(employee[c])"),
    ("Use label encoding for 'City' and one-hot encoding for 'Education'.",
     "df = pd.get_dummies(df, columns=['Education'])"),  # one-hot asked too
    ("Which 3 cars have the worst mpg?", "print(df.sort_values('mpg').head(3)['name'])"),
    ("Which 3 cars have the worst mpg?", "print(df.nsmallest(3, 'mpg')['name'])"),
    ("Which 3 flights have the worst delays?", "print(df.nlargest(3, 'dep_delay'))"),  # more is worse
    ("Which car has the highest and which the lowest mpg?", "print(df.mpg.idxmax(), df.mpg.idxmin())"),
    ("Which 3 cars have the highest mpg?", "print(df.sort_values('mpg').tail(3))"),
    ("Which 3 cars have the highest mpg?", "print(df.nlargest(3, 'mpg'))"),
    ("What is the most common day?", "print(df['day'].value_counts().idxmax())"),
    ("Which countries have at least 5 records? Sort them by their count.",
     "print(df.Country.value_counts().sort_values(ascending=False))"),  # a bound, not a rank
    ("Use one-hot encoding for 'Sex'.", "df = pd.get_dummies(df, columns=['Sex'], dtype=int)\n"
                                        "X = df.select_dtypes('number')"),
    ("Use one-hot encoding for 'Sex'.", "df = pd.get_dummies(df, columns=['Sex'])\n"
                                        "X = df.select_dtypes(include=['number', 'bool'])"),
])
def test_code_that_does_what_is_asked_is_no_slip(question: str, code: str) -> None:
    assert slips_in(question, code) == []


def test_a_column_divided_by_one_the_question_does_not_name_is_a_slip() -> None:
    # the conversation benchmark's taxis question 4 with the 1.5B model: Manhattan, for Queens
    code = ("df['tip_per_passenger'] = df['tip'] / df['passengers']\n"
            "print(df.groupby('pickup_borough')['tip_per_passenger'].mean().idxmax())")
    found = slips_in("Which pickup borough has the highest average tip?", code)
    assert [r.text for r in found] == [
        "- `df['tip'] / df['passengers']` divides `tip` by `passengers`, a column the question does not "
        "name, and it asks for no ratio (no \"per\", \"rate\", \"share\"). Unless it means that ratio, "
        "compute on `tip` itself, run it again, and answer with what it prints."]
    assert slips_in("What is the mean tip?", "df['pct'] = df.tip / df.total_bill")
    ratio = "r = df.tip / df.total_bill"
    for question, asked in (("Which borough has the highest average tip per passenger?", code),
                            ("What is the tip rate of smokers?", ratio),
                            ("What percent of the bill is the tip, on average?", ratio),
                            ("What is the average tip relative to the total bill?", ratio),
                            ("What is the mean tip?", "m = df.tip.sum() / df.tip.count()"),
                            ("Which passengers paid the most per mile?", "x = df.fare / df.distance"),
                            ("Which is larger on average, the tip or the bill?", ratio),
                            ("What is the mean angle in turns?", "t = df['angle'] / np.pi"),
                            ("What is the mean tip?", "t = df['tip'] / df.size")):
        assert slips_in(question, asked) == [], question  # the ratio asked, or the divisor named


def test_two_slips_of_one_line_are_both_named() -> None:
    # DABench easy 33 as the 1.5B model wrote it: the two-sample test, its statistic as the p-value
    found = slips_in("Use the Kolmogorov-Smirnov test to assess the normality of the \"row m/z\" column.",
                     "ks_test_p_value, normality_decision = ks_2samp(row_mz, 'norm')")
    assert len(found) == 2 and "statistic first" in found[0].text and "kstest" in found[1].text, found


def test_no_slip_in_dsevals_reference_code() -> None:
    """Every DSEval Kaggle question against its authors' reference cell: a slip named beside
    right code costs the model a step, so none may be found (396 questions)."""
    cells = list(reference_cells())
    found = [f"{name}: {question[:80]!r}: {slips[0].text[:80]}" for name, question, code in cells
             if (slips := slips_in(question, code))]
    assert len(cells) >= 350, len(cells)
    assert found == []


SATURDAY = "Of the Saturday dinners, what percent were at smokers' tables?"


@pytest.mark.parametrize("code", [
    # the conversation benchmark's tips question 3 with the 1.5B model (45.16% for 48.28%)
    "smokers_dinner_count = df[(df['day'] == 'Sat') & (df['smoker'] == 'Yes')].shape[0]\n"
    "total_smokers_dinner_count = df[df['smoker'] == 'Yes'].shape[0]\n"
    "percentage_smokers_dinner = (smokers_dinner_count / total_smokers_dinner_count) * 100\n"
    "print(percentage_smokers_dinner)",
    "smokers = df[df.smoker == 'Yes']\nprint((smokers.day == 'Sat').mean() * 100)",
    # chained subsets, as the model wrote titanic's question 5
    "smokers = df[df.smoker == 'Yes']\nsat = smokers[smokers.day == 'Sat']\n"
    "print(len(sat) / len(smokers) * 100)",
    "print(((df.day == 'Sat') & (df.smoker == 'Yes')).sum() / (df.smoker == 'Yes').sum())",
])
def test_a_share_among_the_rows_the_question_does_not_count_among_is_a_slip(code: str) -> None:
    found = slips_in(SATURDAY, code)
    assert len(found) == 1, found
    assert "among the rows where `smoker == 'Yes'`" in found[0].text
    assert "a share of the rows where `day == 'Sat'` (\"Of the Saturday\")" in found[0].text


@pytest.mark.parametrize(("question", "code"), [
    (SATURDAY, "saturday = df[df['day'] == 'Sat']\nprint((saturday['smoker'] == 'Yes').mean() * 100)"),
    (SATURDAY, "sat = df[df.day == 'Sat']\nprint(len(sat[sat.smoker == 'Yes']) / len(sat) * 100)"),
    (SATURDAY, "print(len(df[(df.day == 'Sat') & (df.smoker == 'Yes')]) / len(df[df.day == 'Sat']))"),
    # the share of the smokers asked for: the smokers are the base
    ("Of the smokers, what percent dined on Saturday?",
     "smokers = df[df.smoker == 'Yes']\nprint((smokers.day == 'Sat').mean() * 100)"),
    ("What percent of the smokers' tables were on Saturday?",
     "smokers = df[df.smoker == 'Yes']\nprint((smokers.day == 'Sat').mean() * 100)"),
    # no share asked
    ("What is the mean bill of the Saturday smokers?",
     "smokers = df[df.smoker == 'Yes']\n"
     "print(smokers[smokers.day == 'Sat'].total_bill.sum() / len(smokers))"),
])
def test_a_share_among_the_rows_asked_is_no_slip(question: str, code: str) -> None:
    assert slips_in(question, code) == []


def test_two_names_computed_the_same_way_are_a_slip() -> None:
    # the conversation benchmark's brussels-hotels with the 1.5B model: 0.68 and 0.68, "False"
    code = ("rate_2016 = df[df['Quartier'] == 'Brussels Airport']['Occupancy rate'].mean()\n"
            "rate_2015 = df[df['Quartier'] == 'Brussels Airport']['Occupancy rate'].mean()\n"
            "print(rate_2016 < rate_2015)")
    found = slips_in("Was the average occupancy rate at Brussels Airport lower in 2016 than in 2015?", code)
    assert [r.text for r in found] == [
        "- `rate_2016` and `rate_2015` are computed by the same code (`df[df['Quartier'] == 'Brussels "
        "Airport']['Occupancy rate'].mean()`): they are equal whatever the data, and comparing them tells "
        "nothing. Compute each on the rows its name says, run it again, and answer with what it prints."]
    assert slips_in("How many?", "a = len(df[df.x > 1])\nb = len(df[df.x > 1])")
    for fine in ("a = df[df.year == 2016].rate.mean()\nb = df[df.year == 2015].rate.mean()",
                 "train = df.copy()\ntest = df.copy()",
                 "x = np.random.rand(10)\ny = np.random.rand(10)",
                 "m1 = LinearRegression()\nm2 = LinearRegression()",
                 "a = pd.read_csv('t.csv')\nb = pd.read_csv('t.csv')",
                 "m = df.rate.mean()\nm = df.rate.mean()"):  # one name bound twice
        assert slips_in("Was it lower in 2016?", fine) == [], fine


@pytest.mark.parametrize("code", [
    # DABench hard 137 with the 1.5B model: an accuracy of 1.00 (0.61 without the target)
    "X_train, X_test, y_train, y_test = train_test_split(df[['IsAlone', 'Survived']], df['Survived'], "
    "test_size=0.3, random_state=42)",
    "X = df[['IsAlone', 'Survived']]\ny = df['Survived']\nmodel = LogisticRegression().fit(X, y)",
    "X, y = df.drop('Name', axis=1), df['Survived']\nscores = cross_val_score(LogisticRegression(), X, y)",
    "X = df.drop(columns=['Name', 'Ticket'])\ny = df['Survived']\nparts = train_test_split(X, y)",
])
def test_a_target_among_the_features_is_a_slip(code: str) -> None:
    found = slips_in("Train a logistic regression to predict survival and report its accuracy.", code)
    assert len(found) == 1 and "its target, 'Survived', among its features" in found[0].text, found


@pytest.mark.parametrize("code", [
    "X_train, X_test, y_train, y_test = train_test_split(df[['IsAlone']], df['Survived'], test_size=0.3)",
    "X = df.drop('Survived', axis=1)\ny = df['Survived']\nLogisticRegression().fit(X, y)",
    "X = df.drop(columns=['Survived', 'Name'])\ny = df['Survived']\ntrain_test_split(X, y)",
    "X = df.drop(columns=target)\ny = df[target]\ntrain_test_split(X, y)",  # a name: not read
    "X = df.drop(columns=cols)\ny = df['Survived']\ntrain_test_split(X, y)",
    "scaler.fit(df[['Age', 'Fare']])",
    "X = other.drop('Name', axis=1)\ny = df['Survived']\ntrain_test_split(X, y)",  # another frame
])
def test_features_without_the_target_are_no_slip(code: str) -> None:
    assert slips_in("Train a logistic regression to predict survival and report its accuracy.", code) == []


VACCINATIONS = {"country": "country_vaccinations.csv", "daily_vaccinations": "country_vaccinations.csv",
                "total_vaccinations": "country_vaccinations.csv",
                "daily_vaccinations_per_million": "country_vaccinations.csv"}


def test_a_files_column_replaced_by_a_computation_is_a_slip() -> None:
    # DABench easy 123 with the 1.5B model: the file's own column recomputed, Algeria for Gibraltar
    question = "Which country has the highest average number of daily vaccinations per million people?"
    code = ("df['daily_vaccinations_per_million'] = (df['daily_vaccinations'] / df['total_vaccinations'])"
            " * 1e6\n"
            "print(df.groupby('country')['daily_vaccinations_per_million'].mean().idxmax())")
    found = recomputed_columns(question, code, VACCINATIONS)
    assert [r.text for r in found] == [
        "- `df['daily_vaccinations_per_million'] = df['daily_vaccinations'] / df['total_vaccinations'] "
        "* 1000000.0` replaced the values of `daily_vaccinations_per_million`, a column of the file "
        "`country_vaccinations.csv`, with a computation of other columns, and the question does not ask "
        "to change the data. Use the file's own `daily_vaccinations_per_million` as it is (undo this step, "
        "or read the file again), run it again, and answer with what it prints."]
    for asked, right in (
            (question, "df['rate'] = df['daily_vaccinations'] / df['total_vaccinations']"),  # a new column
            (question, "df['daily_vaccinations'] = df['daily_vaccinations'].fillna(0)"),  # reads itself
            (question, "df['daily_vaccinations'] = 0"),  # no other column read
            ("Replace daily_vaccinations_per_million with daily over total vaccinations.", code),  # asked
            ("Recompute it from now on.", code)):
        assert recomputed_columns(asked, right, VACCINATIONS) == [], (asked, right)
    assert recomputed_columns(question, code, {}) == []


def test_no_recomputed_column_in_dsevals_reference_code() -> None:
    """The authors' reference cells against their sets' input files: none replaces a file's
    column with a computation of others for a question that asks for no change."""
    found = [f"{name}: {question[:80]!r}: {slips[0].text[:100]}" for name, question, code in reference_cells()
             if (slips := recomputed_columns(question, code, set_columns(name)))]
    assert found == []


@pytest.mark.parametrize(("code", "runs"), [
    # DABench easy 129 with the 1.5B model: told of the slip, it answered 49.69 again (for 49.67)
    ("print(round(df['Fare'].std(), 2))", "print(round(df['Fare'].std(ddof=0), 2))"),
    ("s = df.groupby('Pclass').Fare.var()\nprint('σ', df.Fare.std())",
     "s = df.groupby('Pclass').Fare.var(ddof=0)\nprint('σ', df.Fare.std(ddof=0))"),  # offsets in bytes
    ("import statistics\nprint(statistics.stdev(df.Fare))",
     "import statistics\nprint(statistics.pstdev(df.Fare))"),
])
def test_the_population_std_asked_runs_with_ddof_0(code: str, runs: str) -> None:
    assert mended_population_std(POPULATION, code) == runs


@pytest.mark.parametrize(("question", "code"), [
    (POPULATION, "print(np.std(df.Fare))"),  # numpy divides by n already
    (POPULATION, "print(df.Fare.std(ddof=0))"),
    (POPULATION, "print(df.Fare.std(skipna=False))"),  # arguments of its own: named, not mended
    (POPULATION, "df.Fare.agg(['mean', 'std'])"),
    (POPULATION, "print(df.Fare.std("),  # does not parse
    (SAMPLE, "print(df.age.std())"),
    ("What is the standard deviation of the fare?", "print(df.Fare.std())"),
])
def test_nothing_else_is_mended(question: str, code: str) -> None:
    assert mended_population_std(question, code) is None


@pytest.mark.parametrize(("code", "runs"), [
    # DABench hard 177 with the 1.5B model: told, it sent the same cell three times (p 49572.0)
    ("p_value, _ = mannwhitneyu(df[df.Pclass == 1].Age, df[df.Pclass == 3].Age)\nprint(p_value)",
     "_, p_value = mannwhitneyu(df[df.Pclass == 1].Age, df[df.Pclass == 3].Age)\nprint(p_value)"),
    # easy 33
    ("ks_test_p_value, normality_decision = ks_2samp(row_mz, 'norm')",
     "normality_decision, ks_test_p_value = ks_2samp(row_mz, 'norm')"),
    ("for g in groups:\n    pval, w = scipy.stats.shapiro(g)  # é\n    print(pval)",
     "for g in groups:\n    w, pval = scipy.stats.shapiro(g)  # é\n    print(pval)"),
])
def test_a_tests_result_unpacked_p_value_first_runs_swapped(code: str, runs: str) -> None:
    assert mended_statistic_first(code) == runs
    assert not any("statistic first" in reason.text for reason in slips_in("", runs))


@pytest.mark.parametrize("code", [
    "statistic, p_value = mannwhitneyu(a, b)", "r, p = stats.pearsonr(x, y)",
    "p, q = split(x)",  # not a test
    "p_value, pval = ttest_ind(a, b)",  # both named for a p-value: which is meant is not known
    "res = ttest_ind(a, b)\np = res.pvalue",
])
def test_nothing_else_is_unpacked_anew(code: str) -> None:
    assert mended_statistic_first(code) is None


def test_no_dseval_reference_cell_is_unpacked_anew() -> None:
    assert [name for name, _, code in reference_cells() if mended_statistic_first(code)] == []


FARE_ABOVE_AVERAGE = ("Calculate the median age of male passengers who survived and paid a fare greater than "
                      "the average fare. Calulate only the ages that are not null.")


@pytest.mark.parametrize("code", [
    # DABench medium 176 as the 1.5B model wrote it (32.00 for 31.5)
    "df = df[df.Sex == 'male']\ndf = df[df.Survived == 1]\ndf = df[df.Fare > df.Fare.mean()]\n"
    "df = df.dropna(subset=['Age'])\nprint(f\"@median_age[{df['Age'].median():.2f}]\")",
    # the threshold named first, over the men only
    "men = df[df['Sex'] == 'male']\naverage = men['Fare'].mean()\n"
    "print(men[(men.Survived == 1) & (men.Fare > average)].Age.median())",
])
def test_a_threshold_taken_over_rows_an_earlier_filter_kept_is_a_slip(code: str) -> None:
    found = slips_in(FARE_ABOVE_AVERAGE, code)
    assert len(found) == 1, found
    assert "taken over the rows this cell's earlier filter kept (`Sex == 'male'`" in found[0].text
    assert "compute the threshold on the whole table before any filter" in found[0].text


@pytest.mark.parametrize(("question", "code"), [
    (FARE_ABOVE_AVERAGE,
     "print(df[(df.Sex == 'male') & (df.Survived == 1) & (df.Fare > df.Fare.mean())].Age.median())"),
    (FARE_ABOVE_AVERAGE, "average = df['Fare'].mean()\nmen = df[df['Sex'] == 'male']\n"
                         "men = men[men.Survived == 1]\nprint(men[men.Fare > average].Age.median())"),
    # the question takes the average over the rows it kept
    ("What is the median age of the men who paid more than the average fare of the male passengers?",
     "men = df[df['Sex'] == 'male']\nprint(men[men.Fare > men.Fare.mean()].Age.median())"),
    ("Among the men, what is the median age of those who paid more than the average fare?",
     "men = df[df['Sex'] == 'male']\nprint(men[men.Fare > men.Fare.mean()].Age.median())"),
    # no threshold asked
    ("What is the median age of the male survivors?",
     "men = df[df['Sex'] == 'male']\nprint(men[men.Age > men.Age.median()].shape)"),
])
def test_a_threshold_over_the_rows_asked_is_no_slip(question: str, code: str) -> None:
    assert slips_in(question, code) == []
