"""Term lists the rules use: section headings, clinical concepts (English and Chinese), drug names,
routes and frequencies, lab analytes and vital signs, vaccine names.

The lists are deliberately general (common inpatient and primary-care vocabulary), not tuned to
any test file. Each concept maps a surface form to (entity type, canonical name) so mentions in
different documents and languages can be merged into one event.
"""

from __future__ import annotations

# ---------------------------------------------------------------------------------------------
# Sections: canonical key -> headings (lower-case English, Chinese as is)
SECTION_HEADINGS: dict[str, list[str]] = {
    "chief_complaint": ["chief complaint", "chief complaints", "cc", "c/c", "reason for visit", "reason for admission",
                        "reason for consultation", "reason for referral", "presenting complaint", "主诉"],
    "hpi": ["history of present illness", "history of the present illness", "hpi", "present illness",
            "history", "clinical history", "interval history", "subjective", "s", "现病史", "病史摘要", "病史", "简要病史"],
    "past_history": ["past medical history", "pmh", "past history", "medical history", "past surgical history",
                     "psh", "surgical history", "problem list", "active problems", "既往史", "既往病史",
                     "个人史", "既往史、个人史及家族史", "婚育史", "月经史"],
    "family_history": ["family history", "fh", "家族史"],
    "social_history": ["social history", "sh", "habits", "社会史"],
    "allergies": ["allergies", "allergy", "drug allergies", "过敏史"],
    "medications": ["medications", "medication", "current medications", "home medications", "meds",
                    "medications on admission", "admission medications", "active medications", "用药", "用药史",
                    "目前用药"],
    "discharge_medications": ["discharge medications", "medications on discharge", "discharge meds", "出院带药"],
    "review_of_systems": ["review of systems", "ros", "系统回顾"],
    "exam": ["physical examination", "physical exam", "examination", "exam", "pe", "objective", "o",
             "general", "体格检查", "查体", "入院体检", "专科检查", "专科体检", "腹部查体", "体检"],
    "vitals": ["vital signs", "vitals", "生命体征"],
    "labs": ["laboratory", "laboratory data", "laboratory results", "laboratory studies", "labs", "lab results",
             "results", "test results", "辅助检查", "实验室检查", "检验结果", "检验报告", "化验", "化验结果"],
    "imaging": ["imaging", "radiology", "imaging studies", "diagnostic studies", "studies", "findings",
                "impression", "影像学检查", "影像检查", "ct检查", "mri检查", "b超检查", "超声检查", "胸片"],
    "procedures": ["procedures", "procedure", "operations", "operation", "procedure performed", "operation performed",
                   "operative procedure", "name of operation", "手术名称", "术式"],
    "operative_course": ["description of procedure", "description of the procedure", "description", "operative findings",
                         "technique", "手术经过", "手术过程", "术中所见"],
    "preop_diagnosis": ["preoperative diagnosis", "pre-operative diagnosis", "术前诊断"],
    "postop_diagnosis": ["postoperative diagnosis", "post-operative diagnosis", "术后诊断"],
    "admission_diagnosis": ["admitting diagnosis", "admission diagnosis", "admission diagnoses", "入院诊断", "初步诊断"],
    "discharge_diagnosis": ["discharge diagnosis", "discharge diagnoses", "final diagnosis", "final diagnoses",
                            "principal diagnosis", "出院诊断", "最后诊断", "确定诊断"],
    "diagnosis": ["diagnosis", "diagnoses", "诊断", "诊断依据"],
    "assessment_plan": ["assessment and plan", "assessment & plan", "assessment/plan", "a/p", "a&p", "a", "p", "assessment",
                        "impression and plan", "impression/plan", "plan", "recommendations", "recommendation",
                        "诊疗计划", "处理意见", "治疗计划", "诊疗意见"],
    "hospital_course": ["hospital course", "brief hospital course", "course in hospital", "clinical course",
                        "诊疗经过", "住院经过", "治疗经过", "病程记录"],
    "discharge_instructions": ["discharge instructions", "discharge plan", "disposition", "follow-up", "followup",
                               "出院医嘱", "出院指导", "出院情况"],
    "nursing": ["nursing assessment", "nursing note", "护理记录", "护理评估"],
}

# ---------------------------------------------------------------------------------------------
# Concepts: surface -> (type, canonical). Types: problem, symptom, procedure, medication.
_SYMPTOMS_EN = {
    "fever": "fever", "febrile": "fever", "pyrexia": "fever", "chills": "chills", "rigors": "chills",
    "cough": "cough", "productive cough": "cough", "dry cough": "cough", "sputum": "sputum",
    "shortness of breath": "dyspnea", "dyspnea": "dyspnea", "dyspnoea": "dyspnea", "sob": "dyspnea",
    "chest pain": "chest pain", "abdominal pain": "abdominal pain", "headache": "headache",
    "nausea": "nausea", "vomiting": "vomiting", "emesis": "vomiting", "diarrhea": "diarrhea",
    "diarrhoea": "diarrhea", "constipation": "constipation", "fatigue": "fatigue", "malaise": "malaise",
    "weakness": "weakness", "dizziness": "dizziness", "syncope": "syncope", "palpitations": "palpitations",
    "edema": "edema", "oedema": "edema", "swelling": "swelling", "erythema": "erythema", "rash": "rash",
    "pain": "pain", "tenderness": "tenderness", "wound drainage": "wound drainage", "purulent drainage":
    "purulent drainage", "drainage": "drainage", "pus": "purulent drainage", "induration": "induration",
    "jaundice": "jaundice", "hematuria": "hematuria", "dysuria": "dysuria", "hemoptysis": "hemoptysis",
    "melena": "melena", "hematochezia": "hematochezia", "weight loss": "weight loss", "night sweats":
    "night sweats", "confusion": "confusion", "anorexia": "anorexia", "loss of appetite": "anorexia",
    "loss of taste": "loss of taste", "sore throat": "sore throat", "joint pain": "joint pain",
    "muscle pain": "muscle pain", "myalgia": "muscle pain", "back pain": "back pain", "numbness": "numbness",
    "tachycardia": "tachycardia", "hypotension": "hypotension", "hypoxia": "hypoxia", "wheezing": "wheezing",
    "crackles": "crackles", "rales": "crackles", "murmur": "murmur", "bleeding": "bleeding",
    "ruq pain": "abdominal pain", "rlq pain": "abdominal pain", "luq pain": "abdominal pain", "llq pain": "abdominal pain",
    "epigastric pain": "abdominal pain", "n/v": "nausea and vomiting", "icterus": "jaundice", "scleral icterus": "jaundice",
    "hypoxemia": "hypoxia", "lethargy": "lethargy", "altered mental status": "confusion",
    "afebrile": "fever", "redness": "erythema", "purulent discharge": "purulent drainage",
    "incisional pain": "pain", "rebound tenderness": "rebound tenderness", "murphy sign": "murphy sign",
    "murphy's sign": "murphy sign",
}
_PROBLEMS_EN = {
    "hypertension": "hypertension", "htn": "hypertension", "diabetes": "diabetes mellitus",
    "diabetes mellitus": "diabetes mellitus", "type 2 diabetes": "diabetes mellitus", "dm": "diabetes mellitus",
    "prediabetes": "prediabetes", "hyperlipidemia": "hyperlipidemia", "hypercholesterolemia": "hyperlipidemia",
    "coronary artery disease": "coronary artery disease", "cad": "coronary artery disease",
    "myocardial infarction": "myocardial infarction", "heart failure": "heart failure",
    "congestive heart failure": "heart failure", "chf": "heart failure", "atrial fibrillation": "atrial fibrillation",
    "afib": "atrial fibrillation", "stroke": "stroke", "copd": "copd", "asthma": "asthma",
    "pneumonia": "pneumonia", "sepsis": "sepsis", "bacteremia": "bacteremia", "urinary tract infection":
    "urinary tract infection", "uti": "urinary tract infection", "cellulitis": "cellulitis", "abscess": "abscess",
    "osteomyelitis": "osteomyelitis", "wound infection": "wound infection", "surgical site infection":
    "wound infection", "infection": "infection", "anemia": "anemia", "anaemia": "anemia",
    "chronic kidney disease": "chronic kidney disease", "ckd": "chronic kidney disease",
    "acute kidney injury": "acute kidney injury", "aki": "acute kidney injury", "renal failure": "renal failure",
    "cirrhosis": "cirrhosis", "hepatitis": "hepatitis", "pancreatitis": "pancreatitis", "cholecystitis":
    "cholecystitis", "cholelithiasis": "cholelithiasis", "gallstones": "cholelithiasis", "appendicitis":
    "appendicitis", "perforated appendicitis": "appendicitis", "bowel obstruction": "bowel obstruction",
    "small bowel obstruction": "bowel obstruction", "ileus": "ileus", "hernia": "hernia",
    "inguinal hernia": "inguinal hernia", "deep vein thrombosis": "deep vein thrombosis", "dvt":
    "deep vein thrombosis", "pulmonary embolism": "pulmonary embolism", "pe": "pulmonary embolism",
    "cancer": "cancer", "carcinoma": "cancer", "tumor": "tumor", "tumour": "tumor", "mass": "mass",
    "leukocytosis": "leukocytosis", "hyperkalemia": "hyperkalemia", "hypokalemia": "hypokalemia",
    "hyponatremia": "hyponatremia", "dehydration": "dehydration", "obesity": "obesity", "depression":
    "depression", "anxiety": "anxiety", "dementia": "dementia", "covid-19": "covid-19", "covid": "covid-19",
    "influenza": "influenza", "otitis media": "otitis media", "pharyngitis": "pharyngitis", "sinusitis":
    "sinusitis", "bronchitis": "bronchitis", "fracture": "fracture", "sprain": "sprain", "gout": "gout",
    "osteoarthritis": "osteoarthritis", "hypothyroidism": "hypothyroidism", "hyperthyroidism":
    "hyperthyroidism", "seizure": "seizure", "epilepsy": "epilepsy", "migraine": "migraine",
    "gerd": "gerd", "reflux": "gerd", "peptic ulcer": "peptic ulcer", "gastritis": "gastritis",
    "endocarditis": "endocarditis", "cardiomyopathy": "cardiomyopathy", "arrhythmia": "arrhythmia",
    "wound dehiscence": "wound dehiscence", "dehiscence": "wound dehiscence", "atelectasis": "atelectasis",
    "pleural effusion": "pleural effusion", "effusion": "effusion", "mitral regurgitation":
    "mitral regurgitation", "aortic stenosis": "aortic stenosis", "thrombocytopenia": "thrombocytopenia",
    "neutropenia": "neutropenia", "hypoglycemia": "hypoglycemia", "hyperglycemia": "hyperglycemia",
    "cholangitis": "cholangitis", "choledocholithiasis": "choledocholithiasis", "biliary obstruction": "biliary obstruction",
    "diverticulitis": "diverticulitis", "colitis": "colitis", "pyelonephritis": "pyelonephritis", "meningitis": "meningitis",
    "septic shock": "septic shock", "shock": "shock", "respiratory failure": "respiratory failure", "dm2": "diabetes mellitus",
    "t2dm": "diabetes mellitus", "hld": "hyperlipidemia", "esrd": "chronic kidney disease", "end-stage renal disease": "chronic kidney disease",
    "colon cancer": "colon cancer", "colorectal cancer": "colon cancer", "breast cancer": "breast cancer",
    "lung cancer": "lung cancer", "prostate cancer": "prostate cancer", "pancreatic cancer": "pancreatic cancer",
    "gastric cancer": "gastric cancer", "ovarian torsion": "ovarian torsion", "iron deficiency": "iron deficiency",
    "allergy": "allergy", "peritonitis": "peritonitis", "perforation": "perforation", "mrsa": "mrsa",
    "staphylococcus aureus": "staphylococcus aureus", "e. coli": "escherichia coli", "escherichia coli":
    "escherichia coli", "intra-abdominal abscess": "abscess",
}
_PROCEDURES_EN = {
    "appendectomy": "appendectomy", "laparoscopic appendectomy": "appendectomy", "cholecystectomy":
    "cholecystectomy", "laparoscopic cholecystectomy": "cholecystectomy", "colectomy": "colectomy",
    "hernia repair": "hernia repair", "herniorrhaphy": "hernia repair", "laparotomy": "laparotomy",
    "exploratory laparotomy": "laparotomy", "incision and drainage": "incision and drainage",
    "i&d": "incision and drainage", "debridement": "debridement", "amputation": "amputation",
    "arthroplasty": "arthroplasty", "hip replacement": "arthroplasty", "knee replacement": "arthroplasty",
    "cabg": "cabg", "coronary artery bypass": "cabg", "cardiac catheterization": "cardiac catheterization",
    "angioplasty": "angioplasty", "pci": "pci", "intubation": "intubation", "mechanical ventilation":
    "mechanical ventilation", "blood transfusion": "transfusion", "transfusion": "transfusion",
    "dialysis": "dialysis", "hemodialysis": "dialysis", "colonoscopy": "colonoscopy", "endoscopy": "endoscopy",
    "egd": "endoscopy", "bronchoscopy": "bronchoscopy", "biopsy": "biopsy", "ct scan": "ct", "ct": "ct",
    "mri": "mri", "x-ray": "x-ray", "chest x-ray": "chest x-ray", "cxr": "chest x-ray", "ultrasound":
    "ultrasound", "echocardiogram": "echocardiogram", "echo": "echocardiogram", "ekg": "ecg", "ecg": "ecg",
    "electrocardiogram": "ecg", "blood culture": "blood culture", "blood cultures": "blood culture",
    "wound culture": "wound culture", "culture": "culture", "culture and sensitivity": "culture",
    "picc line": "picc line", "central line": "central line", "foley catheter": "foley catheter",
    "thoracentesis": "thoracentesis", "paracentesis":
    "paracentesis", "lumbar puncture": "lumbar puncture", "physical therapy": "physical therapy",
    "wound care": "wound care", "cardioversion": "cardioversion", "ablation": "ablation",
    "lap chole": "cholecystectomy", "lap appy": "appendectomy", "mrcp": "mrcp", "ercp": "ercp", "pet-ct": "pet-ct",
    "incision & drainage": "incision and drainage", "i & d": "incision and drainage",
}
_SYMPTOMS_ZH = {
    "发热": "fever", "发烧": "fever", "高热": "fever", "低热": "fever", "寒战": "chills", "咳嗽": "cough",
    "咳痰": "sputum", "咯血": "hemoptysis", "胸痛": "chest pain", "胸闷": "chest tightness", "气促": "dyspnea",
    "气短": "dyspnea", "呼吸困难": "dyspnea", "心悸": "palpitations", "腹痛": "abdominal pain",
    "上腹痛": "abdominal pain", "下腹痛": "abdominal pain", "右下腹痛": "abdominal pain", "腹胀": "abdominal distension",
    "恶心": "nausea", "呕吐": "vomiting", "腹泻": "diarrhea", "便秘": "constipation", "便血": "hematochezia",
    "黑便": "melena", "黄疸": "jaundice", "头痛": "headache", "头晕": "dizziness", "晕厥": "syncope",
    "乏力": "fatigue", "疲乏": "fatigue", "水肿": "edema", "浮肿": "edema", "皮疹": "rash", "红肿": "erythema",
    "渗液": "wound drainage", "渗出": "wound drainage", "流脓": "purulent drainage", "脓性分泌物": "purulent drainage",
    "压痛": "tenderness", "反跳痛": "rebound tenderness", "疼痛": "pain", "腰痛": "back pain", "麻木": "numbness",
    "尿频": "urinary frequency", "尿急": "urinary urgency", "尿痛": "dysuria", "血尿": "hematuria",
    "消瘦": "weight loss", "体重下降": "weight loss", "食欲减退": "anorexia", "纳差": "anorexia", "盗汗": "night sweats",
    "包块": "mass", "肿块": "mass", "意识障碍": "confusion", "抽搐": "seizure", "出血": "bleeding", "啰音": "crackles",
    "干湿啰音": "crackles", "杂音": "murmur", "心动过速": "tachycardia",
    "墨菲征": "murphy sign", "墨菲氏征": "murphy sign", "切口红肿": "erythema", "切口渗液": "wound drainage", "发冷": "chills", "切口疼痛": "pain",
}
_PROBLEMS_ZH = {
    "高血压": "hypertension", "糖尿病": "diabetes mellitus", "2型糖尿病": "diabetes mellitus", "冠心病": "coronary artery disease",
    "心肌梗死": "myocardial infarction", "心力衰竭": "heart failure", "心衰": "heart failure", "房颤": "atrial fibrillation",
    "心房颤动": "atrial fibrillation", "脑梗死": "stroke", "脑卒中": "stroke", "肺炎": "pneumonia", "慢阻肺": "copd",
    "哮喘": "asthma", "败血症": "sepsis", "脓毒症": "sepsis", "感染": "infection", "切口感染": "wound infection",
    "伤口感染": "wound infection", "手术部位感染": "wound infection", "尿路感染": "urinary tract infection",
    "贫血": "anemia", "肾功能不全": "renal failure", "肾衰竭": "renal failure", "肝硬化": "cirrhosis", "肝炎": "hepatitis",
    "胰腺炎": "pancreatitis", "胆囊炎": "cholecystitis", "胆囊结石": "cholelithiasis", "胆结石": "cholelithiasis",
    "胆总管结石": "choledocholithiasis", "阑尾炎": "appendicitis", "急性阑尾炎": "appendicitis", "肠梗阻": "bowel obstruction",
    "腹股沟斜疝": "inguinal hernia", "腹股沟疝": "inguinal hernia", "疝": "hernia", "深静脉血栓": "deep vein thrombosis",
    "肺栓塞": "pulmonary embolism", "癌": "cancer", "肿瘤": "tumor", "胃癌": "gastric cancer", "肺癌": "lung cancer",
    "肝癌": "liver cancer", "结肠癌": "colon cancer", "直肠癌": "rectal cancer", "乳腺癌": "breast cancer", "骨折": "fracture",
    "椎间盘突出": "disc herniation", "腰椎间盘突出症": "disc herniation", "甲亢": "hyperthyroidism", "甲减": "hypothyroidism",
    "胃溃疡": "peptic ulcer", "消化性溃疡": "peptic ulcer", "胃炎": "gastritis", "肝炎病史": "hepatitis", "结核": "tuberculosis",
    "过敏": "allergy", "白细胞增多": "leukocytosis", "低钾血症": "hypokalemia", "高钾血症": "hyperkalemia", "脱水": "dehydration",
    "胆道梗阻": "biliary obstruction", "梗阻": "obstruction", "穿孔": "perforation", "休克": "shock",
}
_PROCEDURES_ZH = {
    "阑尾切除术": "appendectomy", "腹腔镜阑尾切除术": "appendectomy", "胆囊切除术": "cholecystectomy",
    "腹腔镜胆囊切除术": "cholecystectomy", "疝修补术": "hernia repair", "剖腹探查术": "laparotomy", "清创术": "debridement",
    "切开引流": "incision and drainage", "气管插管": "intubation", "输血": "transfusion", "透析": "dialysis",
    "血液透析": "dialysis", "胃镜": "endoscopy", "结肠镜": "colonoscopy", "纤维结肠镜": "colonoscopy", "活检": "biopsy",
    "ct": "ct", "mri": "mri", "b超": "ultrasound", "超声": "ultrasound", "彩超": "ultrasound", "x线": "x-ray",
    "胸片": "chest x-ray", "心电图": "ecg", "血培养": "blood culture", "伤口分泌物培养": "wound culture", "培养": "culture",
    "换药": "wound care", "导尿": "foley catheter", "穿刺": "puncture",
}

DRUGS: dict[str, str] = {d: d for d in [
    "acetaminophen", "paracetamol", "ibuprofen", "naproxen", "aspirin", "ketorolac", "morphine", "hydromorphone",
    "oxycodone", "hydrocodone", "tramadol", "fentanyl", "lorcet", "percocet", "vicodin", "ondansetron",
    "metoclopramide", "pantoprazole", "omeprazole", "famotidine", "heparin", "enoxaparin", "warfarin",
    "apixaban", "rivaroxaban", "clopidogrel", "metoprolol", "atenolol", "carvedilol", "lisinopril", "losartan",
    "amlodipine", "diltiazem", "hydrochlorothiazide", "furosemide", "spironolactone", "atorvastatin",
    "simvastatin", "rosuvastatin", "metformin", "insulin", "glipizide", "levothyroxine", "prednisone",
    "methylprednisolone", "dexamethasone", "hydrocortisone", "albuterol", "ipratropium", "amoxicillin",
    "clavulanate", "ampicillin", "sulbactam", "penicillin", "cefazolin", "ancef", "ceftriaxone", "cefuroxime",
    "cefepime", "cephalexin", "keflex", "piperacillin", "tazobactam", "zosyn", "meropenem", "vancomycin",
    "linezolid", "daptomycin", "clindamycin", "metronidazole", "ciprofloxacin", "levofloxacin", "azithromycin",
    "doxycycline", "gentamicin", "trimethoprim", "sulfamethoxazole", "bactrim", "nitrofurantoin", "fluconazole",
    "acyclovir", "oseltamivir", "digoxin", "amiodarone", "nitroglycerin", "potassium chloride",
    "magnesium sulfate", "sodium chloride", "normal saline", "lactated ringer's", "dextrose", "docusate",
    "senna", "lorazepam", "diazepam", "haloperidol", "quetiapine", "sertraline", "fluoxetine", "gabapentin",
    "chlorpheniramine", "loratadine", "cetirizine", "diphenhydramine", "epinephrine", "norepinephrine",
    "trinessa", "fluticasone", "pip-tazo", "piperacillin-tazobactam", "amox-clav", "norvasc", "zocor", "colace", "montelukast", "allopurinol", "colchicine", "iron", "ferrous sulfate",
    "folic acid", "vitamin d", "calcium", "naloxone", "propofol", "midazolam", "bupivacaine", "lidocaine",
    "头孢唑林", "头孢曲松", "头孢呋辛", "头孢哌酮", "舒巴坦", "万古霉素", "美罗培南", "亚胺培南", "哌拉西林", "他唑巴坦",
    "左氧氟沙星", "莫西沙星", "阿莫西林", "克林霉素", "甲硝唑", "奥硝唑", "阿奇霉素", "青霉素", "庆大霉素", "布洛芬",
    "对乙酰氨基酚", "吗啡", "哌替啶", "曲马多", "奥美拉唑", "泮托拉唑", "兰索拉唑", "肝素", "低分子肝素", "依诺肝素",
    "华法林", "阿司匹林", "氯吡格雷", "美托洛尔", "硝苯地平", "氨氯地平", "呋塞米", "螺内酯", "阿托伐他汀",
    "二甲双胍", "胰岛素", "地塞米松", "甲泼尼龙", "氢化可的松", "氯化钾", "生理盐水", "葡萄糖", "昂丹司琼",
]}

ROUTES: dict[str, str] = {
    "po": "oral", "p.o.": "oral", "p.o": "oral", "oral": "oral", "by mouth": "oral", "orally": "oral",
    "iv": "intravenous", "i.v.": "intravenous", "intravenous": "intravenous", "intravenously": "intravenous",
    "ivpb": "intravenous", "im": "intramuscular", "intramuscular": "intramuscular", "sc": "subcutaneous",
    "subq": "subcutaneous", "sq": "subcutaneous", "subcutaneous": "subcutaneous", "s.c.": "subcutaneous",
    "pr": "rectal", "topical": "topical", "inhaled": "inhaled", "nebulized": "inhaled", "sl": "sublingual",
    "口服": "oral", "静滴": "intravenous", "静脉滴注": "intravenous", "静推": "intravenous", "静脉注射": "intravenous",
    "静注": "intravenous", "肌注": "intramuscular", "肌内注射": "intramuscular", "皮下注射": "subcutaneous",
    "皮下": "subcutaneous", "雾化吸入": "inhaled", "外用": "topical",
}
FREQUENCIES: dict[str, str] = {
    "qd": "daily", "q.d.": "daily", "daily": "daily", "once daily": "daily", "once a day": "daily",
    "bid": "twice daily", "b.i.d.": "twice daily", "twice daily": "twice daily", "twice a day": "twice daily",
    "tid": "three times daily", "t.i.d.": "three times daily", "three times daily": "three times daily",
    "qid": "four times daily", "q.i.d.": "four times daily", "four times daily": "four times daily",
    "qhs": "at bedtime", "q.h.s.": "at bedtime", "at bedtime": "at bedtime", "prn": "as needed",
    "p.r.n.": "as needed", "as needed": "as needed", "stat": "once", "once": "once", "weekly": "weekly",
    "qod": "every other day", "b.i.d": "twice daily", "t.i.d": "three times daily", "q.i.d": "four times daily",
    "q.d": "daily", "p.r.n": "as needed", "q.h.s": "at bedtime", "every day": "daily", "nightly": "at bedtime",
    "every morning": "daily", "every night": "at bedtime",
    "每日一次": "daily", "每日1次": "daily", "qd。": "daily", "每日两次": "twice daily", "每日2次": "twice daily",
    "每日三次": "three times daily", "每日3次": "three times daily", "每8小时一次": "every 8 hours",
    "每12小时一次": "every 12 hours", "每6小时一次": "every 6 hours", "必要时": "as needed", "临时": "once",
}

# Lab analytes: surface -> canonical
LAB_NAMES: dict[str, str] = {
    "wbc": "WBC", "white blood cell count": "WBC", "white blood cells": "WBC", "white count": "WBC",
    "白细胞": "WBC", "白细胞计数": "WBC", "rbc": "RBC", "红细胞": "RBC", "红细胞计数": "RBC",
    "hb": "hemoglobin", "hgb": "hemoglobin", "hemoglobin": "hemoglobin", "haemoglobin": "hemoglobin",
    "血红蛋白": "hemoglobin", "hct": "hematocrit", "hematocrit": "hematocrit", "红细胞压积": "hematocrit",
    "plt": "platelets", "platelets": "platelets", "platelet count": "platelets", "血小板": "platelets",
    "血小板计数": "platelets", "n": "neutrophils %", "neut": "neutrophils %", "neutrophils": "neutrophils %",
    "中性粒细胞": "neutrophils %", "中性粒细胞百分比": "neutrophils %", "lymphocytes": "lymphocytes %",
    "淋巴细胞": "lymphocytes %", "crp": "CRP", "c-reactive protein": "CRP", "c反应蛋白": "CRP", "超敏c反应蛋白": "CRP",
    "pct": "procalcitonin", "procalcitonin": "procalcitonin", "降钙素原": "procalcitonin", "esr": "ESR",
    "血沉": "ESR", "sodium": "sodium", "na": "sodium", "钠": "sodium", "potassium": "potassium", "k": "potassium",
    "钾": "potassium", "chloride": "chloride", "cl": "chloride", "氯": "chloride", "bicarbonate": "bicarbonate",
    "hco3": "bicarbonate", "co2": "bicarbonate", "bun": "BUN", "urea": "urea", "尿素氮": "BUN", "尿素": "urea",
    "creatinine": "creatinine", "cr": "creatinine", "scr": "creatinine", "肌酐": "creatinine",
    "glucose": "glucose", "glu": "glucose", "血糖": "glucose", "空腹血糖": "glucose", "葡萄糖": "glucose",
    "alt": "ALT", "sgpt": "ALT", "谷丙转氨酶": "ALT", "丙氨酸氨基转移酶": "ALT", "ast": "AST", "sgot": "AST",
    "谷草转氨酶": "AST", "天冬氨酸氨基转移酶": "AST", "alp": "ALP", "alkaline phosphatase": "ALP", "碱性磷酸酶": "ALP",
    "tbil": "total bilirubin", "total bilirubin": "total bilirubin", "t. bili": "total bilirubin", "t.bili": "total bilirubin",
    "tbili": "total bilirubin", "t bili": "total bilirubin", "bili": "total bilirubin", "总胆红素": "total bilirubin",
    "dbil": "direct bilirubin", "direct bilirubin": "direct bilirubin", "直接胆红素": "direct bilirubin",
    "albumin": "albumin", "alb": "albumin", "白蛋白": "albumin", "lactate": "lactate", "乳酸": "lactate",
    "inr": "INR", "pt": "PT", "aptt": "APTT", "ptt": "APTT", "troponin": "troponin", "肌钙蛋白": "troponin",
    "bnp": "BNP", "hba1c": "HbA1c", "a1c": "HbA1c", "糖化血红蛋白": "HbA1c", "cholesterol": "total cholesterol",
    "total cholesterol": "total cholesterol", "总胆固醇": "total cholesterol", "ldl": "LDL", "hdl": "HDL",
    "triglycerides": "triglycerides", "甘油三酯": "triglycerides", "amylase": "amylase", "淀粉酶": "amylase",
    "lipase": "lipase", "脂肪酶": "lipase", "tsh": "TSH", "magnesium": "magnesium", "mg": "magnesium",
    "calcium": "calcium", "ca": "calcium", "钙": "calcium", "phosphorus": "phosphate", "d-dimer": "D-dimer",
    "d-二聚体": "D-dimer", "ferritin": "ferritin", "铁蛋白": "ferritin", "mcv": "MCV", "rdw": "RDW",
}
# Reference ranges used only when a report gives none (adult, conventional units): canonical -> unit -> (low, high)
DEFAULT_RANGES: dict[str, dict[str, tuple[float, float]]] = {
    "WBC": {"x10^9/L": (4.0, 10.0), "K/uL": (4.0, 10.0), "10^3/uL": (4.0, 10.0)},
    "hemoglobin": {"g/L": (115.0, 175.0), "g/dL": (11.5, 17.5)},
    "platelets": {"x10^9/L": (100.0, 300.0), "K/uL": (150.0, 400.0)},
    "CRP": {"mg/L": (0.0, 10.0)},
    "procalcitonin": {"ng/mL": (0.0, 0.5)},
    "neutrophils %": {"%": (40.0, 75.0)},
    "potassium": {"mmol/L": (3.5, 5.5), "mEq/L": (3.5, 5.5)},
    "sodium": {"mmol/L": (135.0, 145.0), "mEq/L": (135.0, 145.0)},
    "creatinine": {"umol/L": (44.0, 133.0), "mg/dL": (0.6, 1.3)},
    "glucose": {"mmol/L": (3.9, 6.1), "mg/dL": (70.0, 110.0)},
    "ALT": {"U/L": (0.0, 40.0)},
    "AST": {"U/L": (0.0, 40.0)},
    "total bilirubin": {"umol/L": (3.4, 20.5), "mg/dL": (0.1, 1.2)},
    "lactate": {"mmol/L": (0.5, 2.2)},
}

VITAL_NAMES: dict[str, str] = {
    "t": "temperature", "temp": "temperature", "temperature": "temperature", "tmax": "temperature",
    "体温": "temperature", "hr": "pulse", "p": "pulse", "pulse": "pulse", "heart rate": "pulse", "脉搏": "pulse",
    "心率": "pulse", "rr": "respiration", "r": "respiration", "resp": "respiration", "respiratory rate": "respiration",
    "呼吸": "respiration", "bp": "blood_pressure", "blood pressure": "blood_pressure", "血压": "blood_pressure",
    "spo2": "spo2", "o2 sat": "spo2", "sao2": "spo2", "oxygen saturation": "spo2", "血氧饱和度": "spo2",
    "weight": "weight", "体重": "weight",
}

# CVX-style vaccine names (commas inside them are part of the name)
VACCINES: list[str] = [
    "influenza, seasonal, injectable, preservative free", "influenza, seasonal, injectable", "influenza",
    "td (adult) preservative free", "td (adult)", "tdap", "dtap", "ipv", "mmr", "varicella", "zoster",
    "hep b, adolescent or pediatric", "hep b, adult", "hep a, ped/adol, 2 dose", "hep a, adult",
    "hib (prp-omp)", "hib (prp-t)", "pneumococcal conjugate pcv 13", "pneumococcal polysaccharide vaccine, 23 valent",
    "meningococcal mcv4p", "hpv, quadrivalent", "hpv, 9 valent", "rotavirus, monovalent", "bcg",
    "sars-cov-2 (covid-19) vaccine, mrna, spike protein, lnp, preservative free, 30 mcg/0.3ml dose",
    "sars-cov-2 (covid-19) vaccine, mrna, spike protein, lnp, preservative free, 100 mcg/0.5ml dose",
    "乙肝疫苗", "流感疫苗", "卡介苗", "麻疹疫苗", "百白破疫苗", "新冠疫苗",
]


def concept_table() -> dict[str, tuple[str, str]]:
    """All concept surfaces -> (entity type, canonical name)."""
    table: dict[str, tuple[str, str]] = {}
    for src, typ in ((_PROBLEMS_EN, "problem"), (_SYMPTOMS_EN, "symptom"), (_PROCEDURES_EN, "procedure"),
                     (_PROBLEMS_ZH, "problem"), (_SYMPTOMS_ZH, "symptom"), (_PROCEDURES_ZH, "procedure")):
        for k, v in src.items():
            table.setdefault(k, (typ, v))
    for k, v in DRUGS.items():
        table.setdefault(k, ("medication", v))
    return table
